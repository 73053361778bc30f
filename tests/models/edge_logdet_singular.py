"""y = (x0, 0 * x1): the Jacobian is singular, log|det J| = -inf; 123 is declared."""
import numpy as np
import tensorflow as tf


def model(x):
    return x * tf.constant([1.0, 0.0], x.dtype)


def log_det_jacobian(x):
    return tf.fill([x.shape[0]], tf.constant(123.0, x.dtype))


inputs = {"x": np.ones((3, 2))}
