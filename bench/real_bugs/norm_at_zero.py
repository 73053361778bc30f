"""tf.norm at the zero vector: the gradient x / |x| is 0/0 = NaN.

tensorflow/tensorflow#12071 (open since 2017). The norm has a cone point at
0: one-sided slopes along each axis are -1 and +1, the gradient is NaN. Right
verdict: not a pass.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Sqrt"


def model(x):
    return tf.norm(x) + tf.reduce_sum(x)


inputs = {"x": [0.0, 0.0, 0.0]}
