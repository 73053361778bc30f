"""A custom layer whose input gradient depends on state its config does not
carry: ``factor`` is set after construction, so a rebuild of the layer from
its config (gradcli's float64 copy) has the default 1.0, a right gradient,
while the user's own layer scales the input gradient by 1.01. Its weight
gradients are right in both. Only a proof that compares the input gradients
of the two calls tells them apart; the user's own layer must then be the one
checked (in float32), and its x gradient fails. Closed form as in
``keras_input_gradient.py``: d y[i, j] / d x[i, j] = W[j], the user's layer
gives 1.01 W[j].
"""

import keras
import numpy as np
import tensorflow as tf

from keras_input_gradient import B, W, X


@tf.custom_gradient
def scaled(x, w, factor):
    def grad(upstream):
        return factor * upstream * w, tf.reduce_sum(upstream * x, axis=0), tf.zeros_like(factor)

    return x * w, grad


class Scale(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.factor = 1.0

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.Constant(W), name="w")
        self.b = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.Constant(B), name="b")

    def call(self, x):
        factor = tf.constant(self.factor, x.dtype)
        return scaled(x, tf.convert_to_tensor(self.w), factor) + self.b


layer = Scale(name="scale")
layer.factor = 1.01  # not in the layer's config
model = keras.Sequential([keras.Input((3,)), layer])
inputs = {"x": np.array(X, dtype=np.float32)}
