"""tfp.math.hypergeometric.hyp2f1_small_argument(a, b, c, z) with respect to z,
4 elements: one near 0, one past 1/2 and two toward -1 and 1, where TFP's
series switch to their transformations."""
import numpy as np
import tensorflow as tf
from tensorflow_probability.python.math import hypergeometric

inputs = {"z": np.array([0.1, 0.6, -0.8, 0.9])}


def model(z):
    a, b, c = (tf.constant(v, z.dtype) for v in (0.5, 1.5, 2.25))
    return hypergeometric.hyp2f1_small_argument(a, b, c, z)
