"""Two outputs whose gradient errors cancel in the sum: d(out_a)/dx is off by +0.1
and d(out_b)/dx by -0.1, so tf.gradients([a, b], x) is right but each is wrong."""
import tensorflow as tf


def _biased(bias):
    @tf.custom_gradient
    def square(x):
        return x * x, lambda dy: dy * (2.0 * x + bias)

    return square


def model(x):
    return {"a": _biased(0.1)(x), "b": _biased(-0.1)(x)}


inputs = {"x": [1.0, 2.0, 3.0]}
