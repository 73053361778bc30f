"""`inputs` holds Python objects: refused."""
import tensorflow as tf


def model(x, extra):
    return x * x


inputs = {"x": [1.0, 2.0], "extra": None}
