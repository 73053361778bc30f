"""A correct float64 model whose value (about 6e13) swamps its derivative
(1e-3): one ulp of f is 0.0078, so no step that keeps x near the point moves f
by a resolvable amount. Inconclusive in float64 itself."""
import numpy as np
import tensorflow as tf


def model(x):
    return tf.reduce_sum(1e13 + 1e-3 * x)


inputs = {"x": np.linspace(1.0, 3.0, 6)}
