"""An overwritten scatter beside a stop_gradient of a rounded value that is no
straight-through estimator: sg(round(4u)/4) is scaled, not added back to the
u it was computed from. The output is

    f(u) = 2 u[2] + 3 u[1] + 0.5 * sum(round(4 u) / 4)

whose derivative (where round is locally constant) is [0, 3, 2]. TensorFlow's
scatter gradient gives u[0] the slope 2: a wrong gradient, not a surrogate,
although a quantizer and a stop_gradient are on the path.
"""

import tensorflow as tf


def model(u):
    merged = tf.tensor_scatter_nd_update(tf.zeros([4], u.dtype), [[1], [3], [1]], u)
    rounded = tf.stop_gradient(tf.round(u * 4.0) / 4.0)
    return tf.reduce_sum(merged * tf.constant([1.0, 2.0, 5.0, 3.0], u.dtype)) + 0.5 * tf.reduce_sum(rounded)


inputs = {"u": [0.4, -1.3, 0.9]}
