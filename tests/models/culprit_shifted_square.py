"""A wrong tf.custom_gradient: v = x - 1 is fed into v * v inside the forward.

energy(x) = sum((x - 1)**2) has gradient 2 (x - 1); the gradient below
forgets the factor 2.
"""

import tensorflow as tf


@tf.custom_gradient
def energy(x):
    v = x - 1.0

    def grad(upstream):
        return upstream * v  # BUG: should be 2 * v

    return tf.reduce_sum(v * v), grad


def model(x):
    return tf.exp(-energy(x))


inputs = {"x": [0.3, 1.7, 2.1]}
