"""A complex output: forward shows real and imaginary parts.

Truth: x * (1 + 2i) at x = [1, -3] is [1+2i, -3-6i].
"""
import tensorflow as tf


def model(x):
    return tf.complex(x, 2.0 * x)


inputs = {"x": [1.0, -3.0]}
