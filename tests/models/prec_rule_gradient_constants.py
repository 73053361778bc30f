"""A correct float64 custom gradient that builds float32 constants beside the
cotangent (a scale computed in float32 from constants, a float32 mask of the
shape), none of which carries x or the cotangent: float64 rules apply.

f(x) = sum(x**3 / 3); the gradient is upstream * x**2 * (2.0 * 0.5) * 1.
"""

import tensorflow as tf


@tf.custom_gradient
def cube_third(x):
    def grad(upstream):
        scale = tf.constant(2.0, tf.float32) * tf.constant(0.5, tf.float32)
        mask = tf.ones(tf.shape(x), tf.float32)
        return upstream * x**2 * tf.cast(scale * mask, tf.float64)

    return x**3 / 3.0, grad


def model(x):
    return tf.reduce_sum(cube_third(x))


inputs = {"x": [0.4, -1.3, 2.2]}
