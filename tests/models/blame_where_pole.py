"""tf.where with a pole in the branch it does not select: at x = 1 the function
is log(x + 1) (slope 1/2), but the gradient of 1/(1 - x) is inf there and
0 * inf poisons it: NaN. The op that makes the first non-finite value is the
division."""

import tensorflow as tf


def model(x):
    pole = 1.0 / (1.0 - x)
    return tf.where(x < 0.0, pole, tf.math.log(x + 1.0))


inputs = {"x": [1.0, 0.5]}
