"""Not a per-example map: each output row adds the batch mean."""

import tensorflow as tf


def model(x):
    return x + tf.reduce_mean(x, axis=0, keepdims=True)


def log_det_jacobian(x):
    return tf.zeros([2], x.dtype)


inputs = {"x": [[0.1, 0.2], [0.3, -0.4]]}
