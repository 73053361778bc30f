"""tf.where whose unselected branch overflows: NaN gradient.

tensorflow/tensorflow#2540 and #38349. y = where(x > 0, 0, exp(x)) is 0 for
x > 0, so dy/dx = 0 there; at x = 1000 exp(x) is inf in float64 and the
gradient is 0 * inf = NaN. Right verdict: not a pass.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Exp"


def model(x):
    return tf.where(x > 0.0, tf.zeros_like(x), tf.exp(x)) + x


inputs = {"x": [1000.0, 800.0]}
