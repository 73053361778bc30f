"""z^2 with the conjugate in its custom gradient: right (_complex_square.py)."""
from _complex_square import square_model

model, inputs = square_model(conjugate=True)
