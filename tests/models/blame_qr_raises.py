"""A TensorFlow op whose registered gradient raises: QR of a tall matrix with
``full_matrices=True`` (TensorFlow's QrGrad raises NotImplementedError for
nrows > ncols with full matrices). The forward pass is fine; an AddV2 and a
Mul sit next to the Qr op so a report that names a neighbour is wrong.
"""

import numpy as np
import tensorflow as tf


def model(a, b):
    shifted = a + b
    q, r = tf.linalg.qr(shifted, full_matrices=True)
    return tf.reduce_sum(r * r) + 2.0 * tf.reduce_sum(q[:, :2] * shifted)


inputs = {
    "a": np.array([[2.0, 0.3], [0.5, 1.7], [-0.4, 0.9], [1.1, -0.6]]),
    "b": np.array([[0.1, 0.0], [0.0, 0.1], [0.2, 0.0], [0.0, -0.2]]),
}
