"""tf.math.igamma's derivative with respect to a (tensorflow/tensorflow#17995).

Reported wrong in TF 1.6; since then IgammaGradA implements it. Right verdict
today: pass.
"""

import tensorflow as tf

RIGHT = "pass"


def model(a):
    return tf.math.igamma(a, tf.constant([0.8, 2.5, 1.0], tf.float64))


inputs = {"a": [0.7, 1.9, 3.2]}
