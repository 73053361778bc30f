"""A layer that computes in numpy (``.numpy()``: no TensorFlow path from its
input to its output) beside a Dense layer: TensorFlow returns no gradient
for the numpy layer although its output changes with its input, so its layer
unit fails the disconnected rule and the whole model's gradient misses its
part (tanh(x) summed over the features: d/dx = 1 - tanh(x)^2)."""
import keras
import numpy as np
import tensorflow as tf


class NumpyTanh(keras.layers.Layer):
    def call(self, x):
        return tf.constant(np.tanh(x.numpy()).sum(axis=-1, keepdims=True))


class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.outside = NumpyTanh()

    def call(self, x):
        return self.dense(x) + self.outside(x)


keras.utils.set_random_seed(0)
model = Model()
inputs = {"x": np.random.default_rng(0).standard_normal((2, 3))}
model(inputs["x"])
