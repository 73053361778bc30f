"""SegmentProd's gradient (tensorflow/tensorflow#21892 reported it missing).

TF 2.x registers one; the products below have no zero, so it is smooth.
Right verdict: pass.
"""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return tf.math.segment_prod(x, tf.constant([0, 0, 1, 1, 1]))


inputs = {"x": [0.5, 1.5, -2.0, 0.8, 1.1]}
