"""The second folder's helpers: f(x) = x**3 with a wrong gradient (2x instead of 3x**2)."""
import tensorflow as tf


@tf.custom_gradient
def f(x):
    def grad(upstream):
        return upstream * 2.0 * x

    return x * x * x, grad
