"""The Cholesky gradient is symmetrised; the op reads only the lower triangle.

HIPS/autograd#56 and pytorch/pytorch#137284 discuss the same convention,
which TensorFlow shares: for a non-symmetric argument, logdet via Cholesky does
not depend on the upper triangle, yet the gradient puts half of each
off-diagonal entry there. Right verdict: mismatch, the culprit the Cholesky op.
"""

import numpy as np
import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Cholesky"


def model(a):
    chol = tf.linalg.cholesky(a)
    return 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))


inputs = {"a": np.array([[4.0, 0.3, 0.2], [1.0, 3.0, 0.1], [0.5, 0.4, 2.0]])}
