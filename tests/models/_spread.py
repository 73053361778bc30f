"""Twin fixtures of the spread rule: a soft clip y = tanh(x) whose
``tf.custom_gradient`` is right for |x| <= 2 and, in the wrong twin, twice the
derivative beyond (``factor``); the model's point sends it inputs within 1,
so only the spread meets the wrong range. And a ``log`` whose gradient is
right: the spread's negative points are outside its domain (NaN) and give no
verdict."""

import keras
import numpy as np
import tensorflow as tf


def softclip_of(factor):
    @tf.custom_gradient
    def softclip(x):
        y = tf.tanh(x)

        def grad(dy):
            d = 1 - y * y
            return dy * tf.where(tf.abs(x) > 2.0, factor * d, d)

        return y, grad

    return softclip


def function_model(factor):
    softclip = softclip_of(factor)

    def model(x):
        return softclip(0.5 * x)

    return model, {"x": [0.3, -1.2, 0.8, 1.5]}


class SoftClip(keras.layers.Layer):
    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return softclip_of(self.factor)(x)


def keras_model(factor):
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, kernel_initializer=keras.initializers.RandomNormal(0.0, 0.3, seed=1))(inputs)
    outputs = keras.layers.Dense(1, kernel_initializer=keras.initializers.RandomNormal(0.0, 0.3, seed=2))(
        SoftClip(factor)(hidden))
    return keras.Model(inputs, outputs), {"x": np.array([[0.2, -0.4, 0.5], [0.1, 0.3, -0.2]])}


@tf.custom_gradient
def log(x):
    def grad(dy):
        return dy / x

    return tf.math.log(x), grad
