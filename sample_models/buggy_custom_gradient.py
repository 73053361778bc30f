"""A tf.custom_gradient op with a deliberate bug, to show a failure report.

softplus(x) = log(1 + exp(x)) has derivative sigmoid(x); the gradient below
returns sigmoid(x) * (1 + 1e-3 * x), wrong by a relative 1e-3 * x.
"""

import tensorflow as tf


@tf.custom_gradient
def softplus(x):
    y = tf.math.log1p(tf.exp(x))

    def grad(upstream):
        return upstream * tf.sigmoid(x) * (1.0 + 1e-3 * x)  # BUG: the extra factor

    return y, grad


def model(x):
    return tf.reduce_sum(softplus(x) ** 2)


inputs = {"x": [-1.5, 0.25, 2.0]}
