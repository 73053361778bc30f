"""A custom gradient whose reverse mode is right and whose forward mode is not.

TensorFlow computes JVPs (ForwardAccumulator) from the forward ops, VJPs from
the gradient function. Here the forward ops hide part of the dependence
(x * stop_gradient(x)), so forward mode gives x where the derivative is 2x.
Code that uses forward mode (jvp, Hessian-vector products by forward over
reverse) is wrong. Right verdict: fail, in forward mode.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "forward mode"


@tf.custom_gradient
def square(x):
    return x * tf.stop_gradient(x), lambda dy: dy * 2.0 * x


def model(x, scale):
    return tf.reduce_sum(square(x) * scale)


inputs = {"x": [0.5, -1.5, 2.0], "scale": [1.0, 2.0, 0.5]}
