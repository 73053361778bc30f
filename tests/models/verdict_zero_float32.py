"""A shift b that a normalisation cancels, in float32: z = x + b, then
z - mean(z) removes b exactly, so d/db = 0; TensorFlow's gradient is exactly 0,
and float32 differences see only round-off."""

import numpy as np
import tensorflow as tf


def model(x, b):
    z = x + b
    z = z - tf.reduce_mean(z)
    return tf.reduce_sum(tf.nn.softmax(z) * tf.constant([1.0, 2.0, 3.0, 4.0], z.dtype))


inputs = {"x": np.array([0.5, -1.25, 2.0, 0.75], np.float32), "b": np.float32(0.3)}
