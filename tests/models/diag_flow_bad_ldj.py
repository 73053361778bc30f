"""An affine coupling whose log_det_jacobian forgets the scale of one coordinate.

y = [x0, x1 * exp(s), x2 * 2] with s = tanh(x0): log|det J| = s + log 2;
the declared value leaves out log 2.
"""

import numpy as np
import tensorflow as tf


def model(x):
    s = tf.tanh(x[:, :1])
    return tf.concat([x[:, :1], x[:, 1:2] * tf.exp(s), x[:, 2:] * 2.0], axis=1)


def log_det_jacobian(x):
    return tf.tanh(x[:, 0])  # BUG: + log(2)


inputs = {"x": np.array([[0.1, 0.2, 0.3], [-1.0, 0.5, 2.0]])}
