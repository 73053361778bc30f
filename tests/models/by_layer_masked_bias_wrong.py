"""The twin of ``by_layer_masked_bias.py`` whose tanh's gradient is 1.1 times
the derivative (``_masked_bias``)."""
from _masked_bias import inputs, masked_bias_model  # noqa: F401

model = masked_bias_model(wrong=True)
