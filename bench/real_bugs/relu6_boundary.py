"""relu6 exactly at its upper boundary 6: a kink with a valid subgradient.

Right verdict: pass (the kink reported).
"""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return tf.reduce_sum(tf.nn.relu6(x) * tf.constant([1.0, 2.0], tf.float64))


inputs = {"x": [6.0, 2.0]}
