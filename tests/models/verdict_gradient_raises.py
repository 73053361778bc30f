"""A custom gradient that inverts a matrix built from its input: at this point
the matrix [[1, 2], [2, 4]] is singular, so tf.linalg.inv raises inside the
gradient function (the forward pass is fine)."""

import tensorflow as tf


@tf.custom_gradient
def scale(a):
    def grad(dy):
        inverse = tf.linalg.inv(tf.reshape(a, [2, 2]))
        return dy * inverse[0, 0] * tf.ones_like(a)

    return 2.0 * a, grad


def model(a):
    return tf.reduce_sum(scale(a))


inputs = {"a": [1.0, 2.0, 2.0, 4.0]}
