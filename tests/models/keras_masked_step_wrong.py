"""``keras_masked_step.py`` with a wrong gradient after the LSTM: a cube whose
custom gradient is 2 x**2 (it should be 3 x**2). The padded elements still jump;
every other element's gradient is 2/3 of the truth, a mismatch the jump must not
hide."""

import keras
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def cube(x):
    def grad(upstream):
        return upstream * 2.0 * x * x  # BUG: d/dx x**3 = 3 x**2

    return x * x * x, grad


class Cube(keras.layers.Layer):
    def call(self, x):
        return cube(x)


keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((3, 2)), keras.layers.Masking(0.0), keras.layers.LSTM(2), Cube()])
x = np.random.default_rng(3).uniform(-1.0, 1.0, (2, 3, 2)).astype(np.float32)
x[0, 2] = 0.0  # padding
inputs = {"x": x}
wrt = ["x"]
