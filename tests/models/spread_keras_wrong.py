"""A Keras network whose soft clip layer is wrong beyond |x| > 2 (_spread.py)."""
from _spread import keras_model

model, inputs = keras_model(2.0)
