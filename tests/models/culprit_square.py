"""A wrong tf.custom_gradient whose forward feeds its input twice into a Mul.

square(x) = x * x has derivative 2 x; the gradient returns x. The Mul inside
the forward code is correct and its gradient is never used (the custom
gradient replaces it): the culprit is ``square``.
"""

import tensorflow as tf


@tf.custom_gradient
def square(x):
    def grad(upstream):
        return upstream * x  # BUG: should be 2 * x

    return x * x, grad


def model(x):
    return tf.reduce_sum(tf.sin(square(x + 0.2)))


inputs = {"x": [0.3, -0.7, 1.1]}
