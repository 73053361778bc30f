"""A correct subclassed Keras model that cannot be rebuilt in float64.

A subclassed model has no layer graph, so ``keras.models.clone_model`` cannot
rebuild it with float64 layers: gradcli runs the model itself with its
layers' dtype policies switched to float64 (``keras_float64``), and checks it
with float64 steps and tolerances.
"""

import keras
import numpy as np


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(5, activation="tanh")
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x))


keras.utils.set_random_seed(1)
model = Net()
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
