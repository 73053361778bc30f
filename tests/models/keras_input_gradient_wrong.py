"""``keras_input_gradient.py`` with the input gradient 1% off (1.01 * upstream * w);
its weight gradients are right, so only a check with respect to x can fail."""

from keras_input_gradient import inputs, make_model  # noqa: F401

model = make_model(1.01)
