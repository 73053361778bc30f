"""tf.math.igamma(a=1, x) at x = 0: NaN gradient, derivative 1.

tensorflow/tensorflow#123578. igamma(1, x) = 1 - exp(-x), so d/dx = 1 at 0;
the gradient computes (a - 1) * log(x) = 0 * -inf = NaN. (igamma is not
defined for x < 0, so only the right-sided slope exists.) Right verdict: not a
pass.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Igamma"


def model(x):
    return tf.math.igamma(tf.ones_like(x), x)


inputs = {"x": [0.0]}
