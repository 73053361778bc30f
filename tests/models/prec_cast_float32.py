"""A correct model that computes in float32 inside although its inputs are float64.

``tf.cast(x, tf.float32)`` (what an op or library that returns float32 for any
input does) makes every later op float32; the result is cast back to float64.
The derivative of sum(sin(x) * exp(x / 2)) is cos(x) e^(x/2) + sin(x) e^(x/2) / 2.
"""

import tensorflow as tf


def model(x):
    low = tf.cast(x, tf.float32)
    y = tf.sin(low) * tf.exp(low / 2.0)
    return tf.cast(tf.reduce_sum(y), tf.float64)


inputs = {"x": [0.3, -1.2, 2.0, 0.7]}
