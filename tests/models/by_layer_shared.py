"""A functional model that calls one Dense layer at two sites (a shared layer)."""

import keras

left, right = keras.Input((3,), name="left"), keras.Input((3,), name="right")
shared = keras.layers.Dense(4, activation="tanh", name="shared")
joined = keras.layers.Add(name="join")([shared(left), shared(right)])
model = keras.Model([left, right], keras.layers.Dense(1, name="out")(joined), name="twin")


def inputs(rng):
    return {"left": rng.standard_normal((2, 3)).astype("float32"),
            "right": rng.standard_normal((2, 3)).astype("float32")}
