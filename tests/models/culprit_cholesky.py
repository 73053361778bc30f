"""A TensorFlow op whose own gradient is wrong for the input it is given.

``tf.linalg.cholesky`` reads only the lower triangle of its input, so the
log-determinant below does not depend on the upper triangle of ``a`` at all;
TensorFlow's Cholesky gradient assumes a symmetric input and returns a
symmetrised gradient (half of each off-diagonal entry on each side). The
culprit is the Cholesky op (tensorflow/tensorflow#18870-style reports of a
"wrong" Cholesky gradient for a non-symmetric argument).
"""

import numpy as np
import tensorflow as tf


def model(a):
    chol = tf.linalg.cholesky(a)
    return 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))


inputs = {"a": np.array([[4.0, 0.3, 0.2], [1.0, 3.0, 0.1], [0.5, 0.4, 2.0]])}
