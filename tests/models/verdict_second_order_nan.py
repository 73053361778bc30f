"""f = sum |x|**1.5 at x = (0, 1): the gradient 1.5 |x|**0.5 sign(x) is finite
(0 at 0), the second derivative 0.75 |x|**-0.5 is unbounded at 0, and
TensorFlow's is 0 * Inf = NaN there; at x = 1 it is 0.75."""

import tensorflow as tf


def model(x):
    return tf.reduce_sum(tf.abs(x) ** 1.5)


inputs = {"x": [0.0, 1.0]}
