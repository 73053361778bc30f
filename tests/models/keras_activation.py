"""A weightless custom activation layer given as the model: swish with its own
gradient.

swish(x) = x sigmoid(x) has derivative s (1 + x (1 - s)), s = sigmoid(x).
``make_layer(drop_term)`` writes that gradient; ``keras_activation_wrong.py``
drops the x (1 - s) term (its gradient is sigmoid(x) alone). The layer has no
weights: what it is checked for is the gradient with respect to its input.
"""

import keras
import numpy as np
import tensorflow as tf

X = [[-1.5, -0.2, 0.4, 2.0], [0.7, -0.9, 1.3, 0.1]]


def make_layer(drop_term):
    @tf.custom_gradient
    def swish(x):
        s = tf.sigmoid(x)

        def grad(upstream):
            if drop_term:
                return upstream * s  # BUG: d/dx x s(x) = s (1 + x (1 - s))
            return upstream * s * (1.0 + x * (1.0 - s))

        return x * s, grad

    class Swish(keras.layers.Layer):
        def call(self, x):
            return swish(x)

    return Swish(name="swish")


model = make_layer(drop_term=False)
inputs = {"x": np.array(X, dtype=np.float32)}
