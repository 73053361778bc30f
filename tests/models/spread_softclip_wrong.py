"""The soft clip, wrong only beyond |x| > 2 (_spread.py)."""
from _spread import function_model

model, inputs = function_model(2.0)
