"""A flow y = 2x computed in numpy: TensorFlow sees no gradient; log|det J| = n log 2."""
import numpy as np
import tensorflow as tf


def model(x):
    return tf.constant(2.0 * np.asarray(x))


def log_det_jacobian(x):
    return tf.fill([x.shape[0]], 3.0 * np.log(2.0))


inputs = {"x": np.ones((2, 3))}
