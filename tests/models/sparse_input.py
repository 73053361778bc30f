"""A sparse input through a custom square, right (_value_twins.py)."""
from _value_twins import sparse_model

model, inputs = sparse_model(factor=2.0)
