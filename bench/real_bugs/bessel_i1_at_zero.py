"""tf.math.bessel_i1's gradient at 0 is 1.0; the derivative is 0.5.

tensorflow/tensorflow#120578 (TF 2.21 still returns 1.0). I1'(x) = I0(x) -
I1(x)/x and I1(x)/x -> 1/2 as x -> 0; TensorFlow's safe division replaces
0/0 by 0. The function is smooth at 0. Right verdict: mismatch, the culprit
the BesselI1 op.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "BesselI1"


def model(x):
    return tf.reduce_sum(tf.math.bessel_i1(x) * tf.constant([1.0, 2.0], tf.float64))


inputs = {"x": [0.0, 0.7]}
