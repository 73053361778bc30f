"""Inputs of two floating dtypes differenced in one check: a float32 weight
beside a float64 input. f(x, w) = sum(tanh(x) * w) with w kept float32 by the
model (it casts x down), so d f / d w = tanh(x) and d f / d x = w (1 - tanh(x)**2)."""

import numpy as np
import tensorflow as tf


def model(x, w):
    return tf.reduce_sum(tf.tanh(tf.cast(x, tf.float32)) * w)


inputs = {"x": np.array([0.3, -1.2, 0.7]), "w": np.array([1.5, -0.5, 2.0], np.float32)}
check = {"native-dtype": True}
