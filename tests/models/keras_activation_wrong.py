"""``keras_activation.py`` with the x (1 - sigmoid(x)) term left out of the gradient."""

from keras_activation import inputs, make_layer  # noqa: F401

model = make_layer(drop_term=True)
