"""y = sum(tanh(x W)) through a custom matmul whose kernel gradient is 0.9
times the true one in column 0 of W, and right elsewhere: 1 in 64 of W's
4,096 elements is wrong."""

import tensorflow as tf


@tf.custom_gradient
def matmul(x, w):
    def grad(dy):
        dw = tf.matmul(x, dy, transpose_a=True)
        dw = dw * tf.concat([0.9 * tf.ones_like(dw[:, :1]), tf.ones_like(dw[:, 1:])], 1)
        return tf.matmul(dy, w, transpose_b=True), dw

    return tf.matmul(x, w), grad


def model(x, w):
    return tf.reduce_sum(tf.tanh(matmul(x, w)))


def inputs(rng):
    return {"x": rng.standard_normal((4, 64)), "w": 0.1 * rng.standard_normal((64, 64))}
