"""z^2 whose custom gradient misses the conjugate (_complex_square.py)."""
from _complex_square import square_model

model, inputs = square_model(conjugate=False)
