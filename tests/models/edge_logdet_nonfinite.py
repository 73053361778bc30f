"""y = 2x (log|det J| = 2 log 2 per example) but the declared value is inf, then nan."""
import numpy as np
import tensorflow as tf


def model(x):
    return 2.0 * x


def log_det_jacobian(x):
    return tf.constant([np.inf, np.nan], x.dtype)


inputs = {"x": np.ones((2, 2))}
