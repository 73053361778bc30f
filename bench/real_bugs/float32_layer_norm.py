"""Keras LayerNormalization called on float64 data: it autocasts to float32.

A correct layer computing in float32 inside a float64 check (issue 11 class
4). Right verdict: pass.
"""

import keras
import numpy as np
import tensorflow as tf

RIGHT = "pass"

keras.utils.set_random_seed(0)
norm = keras.layers.LayerNormalization()
norm.build((None, 4))


def model(x):
    return tf.cast(tf.reduce_sum(tf.tanh(norm(x)) * tf.constant([1.0, -2.0, 0.5, 3.0])), tf.float64)


inputs = {"x": np.array([[0.3, -1.2, 2.0, 0.4], [1.0, 0.1, -0.7, 0.2]])}
