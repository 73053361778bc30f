"""A pytree model whose gradient for params.b is twice d y / d b = 1 (_value_twins.py)."""
from _value_twins import pytree_model

model, inputs = pytree_model(b_factor=2.0)
