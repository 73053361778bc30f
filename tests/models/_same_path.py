"""Twin fixtures of two distinct weights at one variable path, as keras-hub's
T5Backbone holds them (right and wrong differ only by the factor the second
weight's custom gradient is off by).

``same_path_model(factor)``: a subclassed Keras model of two ``Scale`` layers,
both named ``scale``, so both weights are at ``twice/scale/w``: y = x * w0 * w1
elementwise, x of shape (2, 3), w0 and w1 of shape (3,). Then
dy[b, j]/dw0[j] = x[b, j] w1[j] and dy[b, j]/dw1[j] = x[b, j] w0[j]. The second
layer's rule gives ``factor`` times its weight's gradient (right: 1). The
short names clash and so do the whole paths: gradcli names the weights
``twice/scale/w-0`` and ``twice/scale/w-1`` (docs/model-files.md, "Weight names").
"""

import keras
import numpy as np
import tensorflow as tf

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
W0 = np.array([1.25, -0.5, 0.75])
W1 = np.array([0.8, 1.5, -1.2])


def scaled(factor):
    @tf.custom_gradient
    def scale(x, w):
        def grad(dy):
            return dy * w, factor * tf.reduce_sum(dy * x, axis=0)

        return x * w, grad

    return scale


class Scale(keras.layers.Layer):
    def __init__(self, factor, start, **kwargs):
        super().__init__(**kwargs)
        self.rule, self.start = scaled(factor), start

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer=keras.initializers.Constant(self.start), name="w")

    def call(self, x):
        return self.rule(x, tf.cast(self.w.value, x.dtype))


class Twice(keras.Model):
    def __init__(self, factor):
        super().__init__(name="twice")
        self.first = Scale(1.0, W0, name="scale")
        self.second = Scale(factor, W1, name="scale")

    def call(self, x):
        return self.second(self.first(x))


def same_path_model(factor):
    model = Twice(factor)
    model(X)
    return model, {"x": X}
