"""x reaches the output only through tf.round, whose gradient is None: the
output is locally constant in x (x is 0.3 and 1.2 from a rounding boundary),
so the pair passes as `disconnected` with a warning at the line of tf.round."""

import tensorflow as tf


def model(w, x):
    return w * 2.0 + tf.round(x)  # CUT: tf.round


inputs = {"w": [1.5, -0.5], "x": [0.3, 1.2]}
