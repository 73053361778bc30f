"""tf.where with a NaN in the unselected branch: y = x log x for x > 0, else 0.
At x = -1 the function is 0 around the point (derivative exactly 0), but
log(-1) = NaN, and its gradient 0 * NaN = NaN flows through tf.where: a wrong
gradient where the function is smooth."""

import tensorflow as tf


def model(x):
    return tf.where(x > 0, x * tf.math.log(x), tf.zeros_like(x))


inputs = {"x": [1.5, -1.0]}
