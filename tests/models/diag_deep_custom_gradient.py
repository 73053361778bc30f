"""A buggy tf.custom_gradient three calls deep: block -> layer -> cube.

cube(x) = x**3 has derivative 3 x**2; the gradient below returns 3 x (a typo).
"""

import tensorflow as tf


@tf.custom_gradient
def cube(x):
    def grad(upstream):
        return upstream * 3.0 * x  # BUG: should be 3 * x**2

    return x**3, grad


def layer(h, w):
    return tf.tanh(cube(h * w) + 0.1)


def block(h, w):
    return layer(tf.sin(h), w) * 2.0


def model(x, w):
    return tf.reduce_sum(block(x + 0.5, w) ** 2)


inputs = {"x": [0.3, -0.7, 1.1], "w": [0.9, 1.3, -0.4]}
