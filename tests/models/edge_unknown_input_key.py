"""`inputs` gives a name the model function does not take."""
import tensorflow as tf


def model(x):
    return x * x


inputs = {"x": [1.0, 2.0], "scale": 3.0}
