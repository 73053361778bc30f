"""A tf.custom_gradient function given as the model itself, its gradient wrong.

TensorFlow's custom_gradient treats only positional tensors as inputs: a
decorated function called with keyword arguments is differentiated through its
forward ops, so its own (wrong) gradient never runs. A checker that calls
models by keyword passes this bug. Right verdict: fail, the custom gradient named.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "tf.custom_gradient model"


@tf.custom_gradient
def model(x):
    def grad(dy):
        return dy * 0.5 * tf.math.rsqrt(x + 1.0) * 1.002  # sqrt'(x + 1), 0.2% off
    return tf.sqrt(x + 1.0), grad


inputs = {"x": [0.3, 1.5, 4.0]}
