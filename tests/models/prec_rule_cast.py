"""A correct model that casts the values to float32 on the differentiated path:
float32 rules, and the note names the Cast and its line.

f(x) = sum(x32**3) in float32, cast back to float64; df/dx = 3 x**2.
"""

import tensorflow as tf


def model(x):
    low = tf.cast(x, tf.float32)  # the precision drops here
    return tf.cast(tf.reduce_sum(low**3), tf.float64)


inputs = {"x": [0.5, -1.5, 1.25]}
