"""A plain function using weights defined at the top of the file: a Keras
layer, a tf.Module (with a tf.function method and a list of variables) and a
bare tf.Variable. gradcli exposes them as inputs: dense/kernel, dense/bias,
linear/w, linear/offsets/0 and scale.

y = scale * (tanh(x K + c) w + offsets[0])
"""

import keras
import numpy as np
import tensorflow as tf

dense = keras.layers.Dense(3, activation="tanh", name="dense", dtype="float64")


class Linear(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.array([[1.0], [-2.0], [0.5]]))
        self.offsets = [tf.Variable(0.25, dtype=tf.float64)]

    @tf.function
    def __call__(self, h):
        return h @ self.w + self.offsets[0]


linear = Linear()
scale = tf.Variable(2.0, dtype=tf.float64)


@tf.function
def model(x):
    return scale * linear(dense(x))


inputs = {"x": np.array([[0.5, -1.0], [2.0, 0.1], [-0.3, 0.7]])}
