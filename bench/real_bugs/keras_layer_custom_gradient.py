"""A custom Keras layer whose ``call`` uses a wrong ``tf.custom_gradient``.

``Swish`` computes z * sigmoid(z) for z = x W; the gradient written in
``call`` returns upstream * sigmoid(z) (the product rule's second term
s (1 - s) z is missing). The model is a plain function of the input and the
layer's kernel (its weights are inputs), so the truth is a closed form:
f = sum(z * s(z)), df/dz = s + z s (1 - s).
"""

import keras
import numpy as np
import tensorflow as tf


class Swish(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 2), name="kernel")

    def call(self, x):
        @tf.custom_gradient
        def swish(z):
            s = tf.sigmoid(z)

            def grad(upstream):
                return upstream * s  # BUG: misses upstream * z * s * (1 - s)

            return z * s, grad

        return swish(tf.matmul(x, self.kernel))


layer = Swish(name="gate", dtype="float64")
layer.build((None, 3))
layer.kernel.assign(np.array([[0.5, -0.3], [0.2, 0.8], [-0.6, 0.1]]))


def model(x):
    return tf.reduce_sum(layer(x))


inputs = {"x": np.array([[0.3, -1.0, 0.7], [1.2, 0.4, -0.5]])}

# bench/real_bugs: A Keras layer whose call uses a wrong tf.custom_gradient.
RIGHT = "fail"
CULPRIT = "Keras layer"
