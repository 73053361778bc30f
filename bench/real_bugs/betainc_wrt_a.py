"""No gradient of betainc(a, b, x) with respect to a (tensorflow/tensorflow#12570).

The Beta distribution's cdf has no gradient with respect to its parameters:
Betainc's registered gradient returns None for a and b. The output depends on
a, so the gradient is wrongly disconnected. Right verdict: disconnected (a
failure), naming the Betainc op.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Betainc"


def model(a):
    return tf.math.betainc(a, 2.0 * tf.ones_like(a), tf.constant([0.3, 0.6], tf.float64))


inputs = {"a": [0.5, 1.5]}
