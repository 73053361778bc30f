"""A Keras network whose soft clip layer is right (_spread.py)."""
from _spread import keras_model

model, inputs = keras_model(1.0)
