"""A correct model with branch points: relu6, a clip to [-1.5, 2.5], a relu.

Its special points must include relu6's 0 and 6, the clip's -1.5 and 2.5.
"""

import tensorflow as tf


def model(x, w):
    h = tf.nn.relu6(x * 3.0) + tf.clip_by_value(x, -1.5, 2.5)
    return tf.reduce_sum(tf.nn.relu(w) * h)


inputs = {"x": [0.3, 1.7, -0.4], "w": [0.5, -0.2, 1.1]}
