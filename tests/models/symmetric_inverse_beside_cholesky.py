"""A Gaussian log-density written by hand: the covariance S feeds both
``tf.linalg.logdet`` (through TensorFlow's Cholesky) and ``tf.linalg.inv``.
Correct; the inverse reads all of S, so S reaches the output around the
Cholesky: compared element by element, with the Cholesky's part as the op
reads its matrix (docs/verdict-rules.md, the symmetric rule), and nothing
here is wrong to name."""
import numpy as np
import tensorflow as tf

X = np.random.default_rng(2).standard_normal((4, 3))


def model(S):
    x = tf.constant(X, S.dtype)
    quadratic = tf.reduce_sum(tf.matmul(x, tf.linalg.inv(S)) * x)
    return -2.0 * tf.linalg.logdet(S) - 0.5 * quadratic


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"S": m @ m.T + 3.0 * np.eye(3)}
