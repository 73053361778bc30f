"""A wrong tf.custom_gradient of two arguments: f(a, b) = (a - b)**2 * a.

df/da = 2 (a - b) a + (a - b)**2 and df/db = -2 (a - b) a; the gradient for
``a`` drops the second term.
"""

import tensorflow as tf


@tf.custom_gradient
def weighted_gap(a, b):
    d = a - b

    def grad(upstream):
        return upstream * 2.0 * d * a, upstream * -2.0 * d * a  # BUG: da misses d**2

    return d**2 * a, grad


def model(a, b):
    return tf.reduce_sum(weighted_gap(a, b))


inputs = {"a": [0.5, 1.5, -0.8], "b": [0.2, -0.4, 0.9]}
