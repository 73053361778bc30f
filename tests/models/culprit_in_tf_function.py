"""A wrong tf.custom_gradient called inside a tf.function.

cube(x) = x**3 has derivative 3 x**2; the gradient returns 3 x. The
tf.function body is traced inline, so the culprit is ``cube``, not the
function's PartitionedCall.
"""

import tensorflow as tf


@tf.custom_gradient
def cube(x):
    def grad(upstream):
        return upstream * 3.0 * x  # BUG: should be 3 * x**2

    return x**3, grad


@tf.function
def inner(x):
    return tf.sin(cube(x))


def model(x):
    return tf.reduce_sum(inner(x + 0.1))


inputs = {"x": [0.3, -0.7, 1.1]}
