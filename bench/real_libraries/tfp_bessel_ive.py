"""tfp.math.bessel_ive(v, z) with respect to z, 4 elements."""
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

inputs = {"z": np.array([0.5, 1.5, 3.0, 7.0])}


def model(z):
    return tfp.math.bessel_ive(tf.constant([0.5, 1.0, 2.0, 3.5], z.dtype), z)
