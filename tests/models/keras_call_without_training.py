"""A subclassed Keras model whose ``call`` takes no ``training`` argument
(y = tanh(x W + b) v): Keras's ``__call__`` drops ``training`` for it, and so
must gradcli's call of the model."""

import keras
import numpy as np


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(4, activation="tanh")
        self.out = keras.layers.Dense(1, use_bias=False)

    def call(self, x):
        return self.out(self.hidden(x))


keras.utils.set_random_seed(3)
model = Net()
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
