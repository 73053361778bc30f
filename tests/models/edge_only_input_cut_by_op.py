"""The only differentiated input reaches the output through a TensorFlow op
whose gradient for it is None (tf.math.betainc with respect to a): a path
exists, so this is a `disconnected` pair naming the op, not "no gradient at
all" (that is for models TensorFlow does not see: numpy arithmetic)."""

import numpy as np
import tensorflow as tf

B = tf.constant([2.0, 3.0], tf.float64)
X = tf.constant([0.3, 0.6], tf.float64)


def model(a):
    return tf.math.betainc(a, B, X)


inputs = {"a": np.array([1.5, 2.5])}
