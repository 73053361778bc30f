"""A functional Keras model with two outputs, two heads on one trunk, built
from Keras' own layers only: every gradient is right. Checked fast with the
layer pass, the whole model is one joint row per output."""

import keras

features = keras.Input((5,))
trunk = keras.layers.Dense(6, activation="tanh", name="trunk")(features)
model = keras.Model(
    features,
    {"a": keras.layers.Dense(2, name="head_a")(trunk), "b": keras.layers.Dense(3, name="head_b")(trunk)},
    name="two_heads",
)


def inputs(rng):
    return {"x": rng.standard_normal((4, 5)).astype("float32")}
