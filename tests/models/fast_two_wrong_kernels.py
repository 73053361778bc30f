"""y = sum(tanh(x W1)) + sum(tanh(x W2)) through fast_wrong_kernel_column.py's
custom matmul, whose kernel gradient is 0.9 times the true one in column 0 and
right elsewhere: two failing inputs of 4,096 elements, 1 in 64 of each wrong."""

import tensorflow as tf
from fast_wrong_kernel_column import matmul


def model(x, w1, w2):
    return tf.reduce_sum(tf.tanh(matmul(x, w1))) + tf.reduce_sum(tf.tanh(matmul(x, w2)))


def inputs(rng):
    return {"x": rng.standard_normal((4, 64)), "w1": 0.1 * rng.standard_normal((64, 64)),
            "w2": 0.1 * rng.standard_normal((64, 64))}
