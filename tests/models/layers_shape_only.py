"""Layers whose output no TensorFlow path reaches from their inputs, inside a
model that is otherwise differentiable: keras-hub's PositionEmbedding, frozen
(``trainable=False``: its table is no weight to check), reads only its
input's shape, so its layer unit is disconnected, and the finite differences
confirm that its output does not change with its input."""
import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(0)
x = keras.Input((4, 8))
positions = keras_hub.layers.PositionEmbedding(sequence_length=4, trainable=False)
hidden = keras.layers.Dense(3, activation="tanh")(keras.layers.Add()([x, positions(x)]))
model = keras.Model(x, hidden)
inputs = {"x": np.random.default_rng(0).standard_normal((1, 4, 8))}
