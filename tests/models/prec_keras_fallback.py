"""A correct subclassed Keras model that runs in float32 only: it cannot be
rebuilt in float64 (no layer graph), and run with float64 dtype policies its
float32 constant meets float64 activations and raises. gradcli falls back to
the model's float32 and must check it with float32 steps and tolerances.
"""

import keras
import numpy as np
import tensorflow as tf


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(5, activation="tanh")
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x)) + tf.constant(0.5, tf.float32)


keras.utils.set_random_seed(1)
model = Net()
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
