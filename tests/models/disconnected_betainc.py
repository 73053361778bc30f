"""TensorFlow has no gradient of betainc(a, b, x) with respect to a and b.

Its registered gradient returns None for ``a`` and ``b`` (only d/dx is
implemented), so ``a`` is disconnected although the output depends on it.
"""

import tensorflow as tf


def model(a, x):
    return tf.reduce_sum(tf.math.betainc(a, 2.0 * tf.ones_like(a), x))


inputs = {"a": [0.5, 1.5], "x": [0.3, 0.6]}
