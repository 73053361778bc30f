"""y = x * n: x float (differentiated), n an integer count (not differentiated).

Truth: dy/dx = n I; --set n=VALUE must stay an integer (2 or 2.0, never 1.5 or true).
"""
import tensorflow as tf


def model(x, n, flag):
    return x * tf.cast(n, x.dtype) * tf.cast(flag, x.dtype)


inputs = {"x": [1.0, 2.0], "n": 2, "flag": True}
