"""y = W @ x with W of shape (3, 4), through a custom gradient that scales the
gradient of one matrix element, W[1, 2], by 1.5: dy_i/dW_jk = [i == j] x_k, so
exactly the column of W[1, 2] (output y[1]) is wrong."""

import numpy as np
import tensorflow as tf

X = tf.constant([0.5, -1.0, 2.0, 0.25], tf.float64)
MASK = np.ones((3, 4))
MASK[1, 2] = 1.5  # BUG: W[1, 2]'s gradient is 1.5 times too large


@tf.custom_gradient
def matvec(w):
    def grad(upstream):
        return upstream[:, None] * X[None, :] * MASK

    return tf.linalg.matvec(w, X), grad


def model(W):
    return matvec(W)


inputs = {"W": np.arange(12.0).reshape(3, 4) / 10.0}
