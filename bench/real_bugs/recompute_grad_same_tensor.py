"""tf.recompute_grad with the same tensor in two argument positions.

tensorflow/tensorflow#36999: the gradient of broken_add(x, x) = 2x was wrong
(fixed since). Right verdict today: pass.
"""

import tensorflow as tf

RIGHT = "pass"


@tf.recompute_grad
def broken_add(a, b):
    return a * b + a


def model(x):
    return tf.reduce_sum(broken_add(x, x))


inputs = {"x": [0.3, -1.1, 2.0]}
