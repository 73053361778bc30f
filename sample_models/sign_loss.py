"""A loss through tf.sign: its gradient is zero almost everywhere.

loss = sum(sign(w * x) * y). TensorFlow's gradient of sign is 0, and so is the
true derivative away from w * x = 0: the check passes, with a warning that
nothing can be learned through it.
"""

import tensorflow as tf


def model(w, x, y):
    return tf.reduce_sum(tf.sign(w * x) * y)


inputs = {"w": [0.8, -1.2], "x": [1.0, 2.0], "y": [0.5, -0.25]}
wrt = ["w"]
