"""A float64 custom gradient whose float32 constant scale (built beside the
cotangent, never touching it) is 3e-4 too large: f(x) = sum(x**3 / 3), the
gradient returns upstream * x**2 * (1 + 3e-4) against the truth x**2. The
constant is not a value on the path, so float64 rules apply and it fails.
"""

import tensorflow as tf


@tf.custom_gradient
def cube_third(x):
    def grad(upstream):
        scale = tf.constant(1.0, tf.float32) + tf.constant(3e-4, tf.float32)
        return upstream * x**2 * tf.cast(scale, tf.float64)

    return x**3 / 3.0, grad


def model(x):
    return tf.reduce_sum(cube_third(x))


inputs = {"x": [0.4, -1.3, 2.2]}
