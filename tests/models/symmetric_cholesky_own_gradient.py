"""A Cholesky factor with the user's own gradient, which leaves out the halving
of the symmetric rule: G + G^T where TensorFlow's is (G + G^T) / 2 (with the
diagonal as TensorFlow's), so it is twice the truth along every symmetric
direction off the diagonal."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def cholesky(A):
    L = tf.linalg.cholesky(A)

    def grad(upstream):
        right = tf.raw_ops.CholeskyGrad(l=L, grad=upstream)  # (G + G^T) / 2
        return right + right - tf.linalg.diag(tf.linalg.diag_part(right))  # BUG: not halved

    return L, grad


def model(A):
    return tf.reduce_sum(tf.sin(cholesky(A)))


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"A": m @ m.T + 3.0 * np.eye(3)}
