"""A summed square whose custom gradient: magnitude (see _upstream.py)."""
from _upstream import summed_square

model, inputs = summed_square("magnitude")
