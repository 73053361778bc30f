"""Inputs written as Python lists beside a float32 constant, as the README writes
them: numpy reads the lists as float64, and float64 x float32 cannot be
multiplied, so the model does not run in float64; TensorFlow reads Python
floats as float32, and so is the model checked.

y = tanh(x W), with tanh's gradient written by hand, (1 - y**2) times
``FACTOR``: 1 here (right), 1.5 in ``lists_float32_constant_wrong.py``.
Closed form: d y[j] / d x[i] = (1 - y[j]**2) W[i, j].
"""

import numpy as np
import tensorflow as tf

W = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32)


def make_model(factor):
    weights = tf.constant(W)  # float32, from a float32 numpy array

    @tf.custom_gradient
    def tanh(z):
        y = tf.tanh(z)

        def grad(upstream):
            return upstream * factor * (1.0 - y * y)

        return y, grad

    def model(x):
        return tanh(tf.matmul(x, weights))

    return model


model = make_model(1.0)
inputs = {"x": [[0.3, -0.7]]}
