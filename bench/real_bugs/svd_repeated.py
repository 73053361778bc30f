"""SVD gradient through U at repeated singular values is NaN.

tensorflow/tensorflow#17476. At a rotation matrix all singular values are 1
and the gradient formula divides by s_i**2 - s_j**2 = 0. Right verdict: not a
pass.
"""

import numpy as np
import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Svd"


def model(a):
    s, u, v = tf.linalg.svd(a)
    return tf.reduce_sum(tf.matmul(u, v, transpose_b=True) * tf.constant([[1.0, 2.0], [3.0, 4.0]], tf.float64))


c, s = np.cos(0.3), np.sin(0.3)
inputs = {"a": np.array([[c, -s], [s, c]])}
