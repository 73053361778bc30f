"""Two relus whose kinks cancel: relu(z) - relu(-z) is z, with slope 1
everywhere, but at z exactly 0 the chain rule through each relu's gradient
(0 at 0) gives 0. Zero rows of data (padding) meet a zero bias, so those
rows' pre-activations sit exactly at 0: every layer is right (the relus are
kinks there), the whole model is differentiable along every direction, and
its reverse-mode gradient at the point is not its derivative."""

import keras
import numpy as np

SEED = 0
keras.utils.set_random_seed(SEED)
features = keras.Input((6,))
pre = keras.layers.Dense(16, name="pre")(features)
up = keras.layers.ReLU(name="up")(pre)
down = keras.layers.ReLU(name="down")(keras.layers.Rescaling(-1.0, name="negate")(pre))
linear = keras.layers.Subtract(name="linear")([up, down])  # = pre
model = keras.Model(features, keras.layers.Dense(3, name="head")(linear), name="net")
loss = "mse"


def inputs(rng):
    x = rng.standard_normal((8, 6)).astype("float32")
    x[4:] = 0.0  # padding rows
    return {"x": x, "y": rng.standard_normal((8, 3)).astype("float32")}
