"""A "safe" custom gradient that is wrong exactly at zero.

f(x) = sum(x**2 * w) has gradient 2 x w; the gradient below adds w where
x == 0 (a guard copied from a division that is not there), so it is wrong only
at an exact zero: only the sweep's special point "x = 0" can see it.
"""

import tensorflow as tf


@tf.custom_gradient
def square(x):
    def grad(upstream):
        guard = tf.where(tf.equal(x, 0.0), tf.ones_like(x), tf.zeros_like(x))
        return upstream * (2.0 * x + guard)  # BUG: the guard term

    return x * x, grad


def model(x):
    return tf.reduce_sum(square(x) * tf.constant([1.0, 2.0, 3.0], tf.float64))


inputs = {"x": [0.5, 1.2, -0.8]}
