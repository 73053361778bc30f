"""A network whose activations sit exactly on its relu kinks: zero rows of data
(padding) meet a zero bias, so those rows' pre-activations are exactly 0 and
a joint probe moves all of them at once."""

import keras
import numpy as np

SEED = 0
keras.utils.set_random_seed(SEED)
features = keras.Input((6,))
hidden = keras.layers.Dense(32, activation="relu", name="hidden")(features)
hidden2 = keras.layers.Dense(32, activation="relu", name="hidden2")(hidden)
model = keras.Model(features, keras.layers.Dense(3, name="head")(hidden2), name="net")
loss = "mse"


def inputs(rng):
    x = rng.standard_normal((8, 6)).astype("float32")
    x[4:] = 0.0  # padding rows
    return {"x": x, "y": rng.standard_normal((8, 3)).astype("float32")}
