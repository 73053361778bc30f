"""A custom Keras layer with weights whose input gradient is right.

``Scale`` computes y = x * w + b (w, b: one value per feature) through a
``tf.custom_gradient`` of x * w. Backpropagation carries dL/dx = upstream * w
through it, dL/dw = sum over the batch of upstream * x; ``make_model(factor)``
scales the input gradient by ``factor``: 1 here, 1.01 in
``keras_input_gradient_wrong.py``, whose weight gradients stay right. Closed
form: d y[i, j] / d x[i, j] = W[j], d y[i, j] / d w[j] = X[i, j], d y[i, j] /
d b[j] = 1.
"""

import keras
import numpy as np
import tensorflow as tf

W = [0.5, -1.5, 2.0]
B = [0.1, 0.2, -0.3]
X = [[0.3, -1.2, 0.7], [1.1, 0.4, -0.8]]


def make_model(factor):
    @tf.custom_gradient
    def scaled(x, w):
        def grad(upstream):
            return factor * upstream * w, tf.reduce_sum(upstream * x, axis=0)

        return x * w, grad

    class Scale(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.Constant(W), name="w")
            self.b = self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.Constant(B), name="b")

        def call(self, x):
            return scaled(x, tf.convert_to_tensor(self.w)) + self.b

    return keras.Sequential([keras.Input((3,)), Scale(name="scale")])


model = make_model(1.0)
inputs = {"x": np.array(X, dtype=np.float32)}
