"""exp(x) whose custom gradient is exp(x) * (1 + 1e-5): off by a relative 1e-5."""
import tensorflow as tf


@tf.custom_gradient
def exp(x):
    y = tf.exp(x)
    return y, lambda dy: dy * y * (1.0 + 1e-5)


def model(x):
    return exp(x)


inputs = {"x": [0.3, -0.2, 1.1]}
