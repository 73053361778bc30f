"""A Sequential model with a loss: a Dense layer of 2,624 weights (checked by
random projections), a smooth activation and a small head, all right."""

import keras

model = keras.Sequential(
    [keras.Input((40,)), keras.layers.Dense(64, activation="tanh", name="wide"),
     keras.layers.Dense(2, name="head")],
    name="seq",
)
loss = "mse"


def inputs(rng):
    return {"x": rng.standard_normal((2, 40)).astype("float32"),
            "y": rng.standard_normal((2, 2)).astype("float32")}
