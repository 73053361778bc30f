"""A float64 model whose loop body computes in float32 (a cast inside a
``tf.while_loop``): the cast is in the loop's body function, not in the
model's own graph, and still lowers the check to float32 rules.

a_0 = x, a_{k+1} = sin(float32(a_k)) + a_k / 2 for k < 3; the model is a_3, so
d a_3 / d x = prod_k (cos(a_k) + 1/2), elementwise.
"""

import numpy as np
import tensorflow as tf


def model(x):
    def body(i, a):
        low = tf.cast(a, tf.float32)
        return i + 1, tf.cast(tf.sin(low), tf.float64) + a * 0.5

    _, y = tf.while_loop(lambda i, a: i < 3, body, (tf.constant(0), x))
    return y


inputs = {"x": np.array([0.3, -1.2, 0.7])}
