"""y = sum(tanh(x W1)) + sum(tanh(x W2)) through a custom matmul whose kernel
gradient is 0.9 times the true one in column 0, and right elsewhere: two
failing inputs of 4,096 elements, 1 in 64 of each wrong."""

import tensorflow as tf


@tf.custom_gradient
def matmul(x, w):
    def grad(dy):
        dw = tf.matmul(x, dy, transpose_a=True)
        dw = dw * tf.concat([0.9 * tf.ones_like(dw[:, :1]), tf.ones_like(dw[:, 1:])], 1)
        return tf.matmul(dy, w, transpose_b=True), dw

    return tf.matmul(x, w), grad


def model(x, w1, w2):
    return tf.reduce_sum(tf.tanh(matmul(x, w1))) + tf.reduce_sum(tf.tanh(matmul(x, w2)))


def inputs(rng):
    return {"x": rng.standard_normal((4, 64)), "w1": 0.1 * rng.standard_normal((64, 64)),
            "w2": 0.1 * rng.standard_normal((64, 64))}
