"""An input that reaches the output only through tf.round and an integer cast.

out = w * cast(round(x), int32) (cast back to float): d out/d w = round(x), and
x is disconnected: TensorFlow returns no gradient for it, and the function is
piecewise constant in x, so its numeric derivative is zero too. The check
passes, says `disconnected` and names the ops that cut the path.
"""

import tensorflow as tf


def model(w, x):
    levels = tf.cast(tf.round(x), tf.int32)
    return w * tf.cast(levels, w.dtype)


inputs = {"w": [0.5, -1.0, 2.0], "x": [0.3, 1.7, -2.2]}
