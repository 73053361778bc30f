"""tfp.math.betaincinv(a, b, y) with respect to y, 4 elements."""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

inputs = {"y": np.array([0.1, 0.35, 0.6, 0.9])}


def model(y):
    return tfp.math.betaincinv(tf.constant([0.5, 1.5, 2.0, 3.0], y.dtype), tf.constant([2.0, 0.7, 1.0, 4.0], y.dtype), y)
