"""The Cholesky factors of two raw covariance matrices, and their log-determinants.

``tf.linalg.cholesky`` reads the lower triangle of A, and TensorFlow's
gradient of it is the symmetric one: correct along the symmetric directions
E_ij + E_ji, the op's domain (d logdet A along S is tr(A^-1 S)), while along
one off-diagonal entry finite differences see the lower entry count twice and
the upper not at all.
"""
import numpy as np
import tensorflow as tf


def model(A):
    L = tf.linalg.cholesky(A)
    return {"L": L, "logdet": 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(L)), axis=-1)}


def inputs(rng):
    m = rng.standard_normal((2, 3, 3))
    return {"A": m @ np.swapaxes(m, -1, -2) + 3.0 * np.eye(3)}
