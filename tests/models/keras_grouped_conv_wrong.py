"""``keras_grouped_conv.py`` followed by a cube whose custom gradient is
2 x**2 (it should be 3 x**2): every derivative is 2/3 of the truth."""

import numpy as np
import tensorflow as tf
import keras

from keras_grouped_conv import block


@tf.custom_gradient
def cube(x):
    def grad(upstream):
        return upstream * 2.0 * x * x  # BUG: d/dx x**3 = 3 x**2

    return x * x * x, grad


class Cube(keras.layers.Layer):
    def call(self, x):
        return cube(x)


model = block(Cube(name="cube"))
inputs = {"x": np.random.default_rng(0).uniform(-1.0, 1.0, (1, 6, 6, 4)).astype("float32")}
wrt = ["x"]
