"""A custom gradient whose gradient calls another custom-gradient function
whose own gradient is wrong: the second derivative is wrong in the inner
rule, which the culprit names (not the outer rule that calls it).

``inner_square(x) = x^2`` with gradient ``3 x`` (the bug: 2 x); ``outer_cube(x)
= x^3 / 3`` with gradient ``upstream * inner_square(x)``: right to first order
(x^2), and its derivative is 3 x, not 2 x. f(x) = sum(outer_cube(x)):
f' = x^2, f'' = 2 x (diagonal); TensorFlow's second derivative gives 3 x.
"""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def inner_square(x):
    def grad(upstream):
        return upstream * 3.0 * x  # BUG: the derivative of x^2 is 2 x

    return x * x, grad


@tf.custom_gradient
def outer_cube(x):
    def grad(upstream):
        return upstream * inner_square(x)

    return x * x * x / 3.0, grad


def model(x):
    return tf.reduce_sum(outer_cube(x))


inputs = {"x": np.array([0.5, -1.2, 0.9])}
