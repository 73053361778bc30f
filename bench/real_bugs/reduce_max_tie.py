"""reduce_max at an exact tie: a kink, TensorFlow splits the gradient evenly.

Each tied element gets 1/2, between the one-sided slopes 0 and 1: a valid
subgradient. Right verdict: pass (with the kink reported).
"""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return tf.reduce_max(x)


inputs = {"x": [1.5, 1.5, -0.3]}
