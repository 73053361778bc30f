"""A ReLU whose custom gradient at 0 is 2: outside the slopes [0, 1], a failing kink."""

import tensorflow as tf


@tf.custom_gradient
def relu(x):
    def grad(upstream):
        return upstream * tf.where(x > 0, tf.ones_like(x), tf.where(x < 0, tf.zeros_like(x), 2.0 * tf.ones_like(x)))

    return tf.nn.relu(x), grad


def model(x):
    return relu(x)


inputs = {"x": [0.0, 1.0, -1.0]}
