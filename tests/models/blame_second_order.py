"""A custom gradient whose first derivative is right and second is wrong.

``soft_cube(x) = x^3 / 3``; its gradient returns ``upstream * x_sq`` where
``x_sq = tf.stop_gradient(x * x)``: the value x^2 is right, but TensorFlow sees
a constant, so the second derivative through it is 0 instead of 2 x (times the
upstream). f(x) = sum(soft_cube(x)) + sum(sin(x)): f' = x^2 + cos x,
f'' = 2 x - sin x (diagonal); TensorFlow's second derivative gives -sin x.
"""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def soft_cube(x):
    def grad(upstream):
        x_sq = tf.stop_gradient(x * x)  # BUG for second order: hides d(x^2)/dx
        return upstream * x_sq

    return x * x * x / 3.0, grad


def model(x):
    return tf.reduce_sum(soft_cube(x)) + tf.reduce_sum(tf.sin(x))


inputs = {"x": np.array([0.5, -1.2, 0.9])}
