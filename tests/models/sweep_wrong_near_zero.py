"""A custom gradient that is right except near zero.

smooth_abs(x) = sqrt(x**2 + 0.01) has derivative x / sqrt(x**2 + 0.01); the
gradient below returns sign(x) wherever |x| < 0.25, a shortcut that is only
right far from zero (off by over 4% at |x| = 0.25, by 100% at x = 0.05). At the
given point every |x| >= 0.5, so the check passes there; the sweep must find
a point with an element near zero.
"""

import tensorflow as tf


@tf.custom_gradient
def smooth_abs(x):
    y = tf.sqrt(x**2 + 0.01)

    def grad(upstream):
        exact = x / y
        return upstream * tf.where(tf.abs(x) < 0.25, tf.sign(x), exact)  # BUG near 0

    return y, grad


def model(x):
    return tf.reduce_sum(smooth_abs(x) * tf.constant([1.0, 2.0, 3.0], tf.float64))


inputs = {"x": [0.5, 1.2, -0.8]}
