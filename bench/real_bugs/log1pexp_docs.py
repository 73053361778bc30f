"""The tf.custom_gradient example of the TensorFlow docs: a stable log(1 + e^x).

Right verdict: pass (its gradient 1 - 1/(1 + e^x) is the derivative).
"""

import tensorflow as tf

RIGHT = "pass"


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad


def model(x):
    return tf.reduce_sum(log1pexp(x))


inputs = {"x": [-3.0, 0.0, 2.5, 10.0]}
