"""A pytree model, right (_value_twins.py)."""
from _value_twins import pytree_model

model, inputs = pytree_model(b_factor=1.0)
