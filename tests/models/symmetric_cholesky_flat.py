"""The log-determinant of a covariance given as a flat vector of its 9 entries:
``tf.linalg.logdet`` takes its Cholesky factor, which reads the lower triangle
of the reshaped matrix. The directions of p that move that matrix
symmetrically are the preimage of the symmetric matrices (6 of 9)."""
import numpy as np
import tensorflow as tf


def model(p):
    return tf.linalg.logdet(tf.reshape(p, [3, 3]))


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"p": (m @ m.T + 3.0 * np.eye(3)).ravel()}
