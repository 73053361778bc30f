"""Tied weights: one variable object held at several places is one weight.

``shared``, a Keras layer (y = w * x elementwise), is called twice, and the
``tf.Module`` ``tied`` holds one ``tf.Variable`` as ``a``, as ``b`` and in the
list ``both``: y = w**2 * a**2 * x, so dy/dw = 2 w a**2 x, dy/da = 2 a w**2 x and
dy/dx = w**2 a**2 (elementwise). gradcli sees two weights, ``shared/w`` and
``tied/a``, each varied at every place it is held.
"""
import keras
import numpy as np
import tensorflow as tf

W = np.array([0.5, -1.25, 2.0])
A = np.array([1.5, 0.75, -0.5])


class Scale(keras.layers.Layer):
    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer=keras.initializers.Constant(W), name="w",
                                 dtype="float64")

    def call(self, x):
        return self.w * x


class Tied(tf.Module):
    def __init__(self):
        super().__init__(name="tied")
        self.a = tf.Variable(A)
        self.b = self.a
        self.both = [self.a, self.b]


shared = Scale(name="shared", dtype="float64")
tied = Tied()


def model(x):
    return shared(shared(x)) * tied.a * tied.both[1]


inputs = {"x": np.array([1.0, -2.0, 0.5])}
