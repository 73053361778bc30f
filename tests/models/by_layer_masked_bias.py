"""A layer whose second output is an attention bias holding its mask as -1e9
(``_masked_bias``): every gradient is right."""
from _masked_bias import inputs, masked_bias_model  # noqa: F401

model = masked_bias_model(wrong=False)
