"""|x| at x = 0: TensorFlow's gradient of abs at 0 is 0,
the central difference is 0 too, but the one-sided slopes are -1 and 1: a kink
(with a valid subgradient), not a zero gradient."""

import tensorflow as tf


def model(x):
    return tf.abs(x)


inputs = {"x": 0.0}
