"""Svd's own gradient is wrong at repeated singular values (tensorflow#17476).

f(a) = sum(C * U V^T): U V^T is the polar factor of a, smooth near the
rotation below, but all singular values are 1 there and TensorFlow's Svd
gradient drops the terms divided by s_i**2 - s_j**2. Truth at a rotation Q:
grad f = Q skew(Q^T C), skew(M) = (M - M^T) / 2. The singular vectors alone
are not unique there, so the culprit is found by its gradient to the output.
"""

import numpy as np
import tensorflow as tf

C = [[1.0, 2.0], [3.0, 4.0]]


def model(a):
    s, u, v = tf.linalg.svd(a)
    return tf.reduce_sum(tf.matmul(u, v, transpose_b=True) * tf.constant(C, tf.float64))


c, s = np.cos(0.3), np.sin(0.3)
inputs = {"a": np.array([[c, -s], [s, c]])}
