"""A float32 input: y = x * x, x = [1, 2] (float32); 1e300 does not fit in it."""
import numpy as np
import tensorflow as tf


def model(x):
    return x * x


inputs = {"x": np.array([1.0, 2.0], dtype=np.float32)}
