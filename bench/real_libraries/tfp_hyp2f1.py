"""tfp.math.hypergeometric.hyp2f1_small_argument(a, b, c, z) with respect to z,
4 elements. TFP sums its Taylor series for -0.5 < z < 0.9 (0.1 and 0.6 here)
and uses a transformation for z <= -0.5 (-0.8) and for z >= 0.9 (0.9, on that
branch's edge: its finite differences straddle both branches, which agree
there)."""
import numpy as np
import tensorflow as tf
from tensorflow_probability.python.math import hypergeometric

inputs = {"z": np.array([0.1, 0.6, -0.8, 0.9])}


def model(z):
    a, b, c = (tf.constant(v, z.dtype) for v in (0.5, 1.5, 2.25))
    return hypergeometric.hyp2f1_small_argument(a, b, c, z)
