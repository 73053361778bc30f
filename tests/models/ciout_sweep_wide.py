"""A custom gradient that is right except near zero, on 12 elements.

smooth_abs(x) = sqrt(x**2 + 0.01) has derivative x / sqrt(x**2 + 0.01); the
gradient below returns sign(x) wherever |x| < 0.25. At the given point every
|x| >= 0.5, so the check passes there; a sweep of radius 1 moves elements near
zero, and its witness (12 numbers) is written to a file instead of printed."""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def smooth_abs(x):
    y = tf.sqrt(x**2 + 0.01)

    def grad(upstream):
        return upstream * tf.where(tf.abs(x) < 0.25, tf.sign(x), x / y)  # BUG near 0

    return y, grad


def model(x):
    return tf.reduce_sum(smooth_abs(x))


inputs = {"x": np.array([0.5, -0.6, 0.7, -0.8, 0.9, -1.0, 0.55, -0.65, 0.75, -0.85, 0.95, -0.5])}
