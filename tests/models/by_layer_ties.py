"""A max-pool over relu outputs with long runs of exact zeros: overlapping
windows of ties (the max of several equal elements), as a real network's first
pool sees them. The pool's gradient is TensorFlow's own and right; at the ties
a valid subgradient (the first maximum of each window) lies outside the
one-sided slopes of single elements, so the layer pass's tie rule decides."""

import numpy as np
import keras

series = keras.Input((12, 4))
rectified = keras.layers.ReLU(name="relu")(series)
pooled = keras.layers.MaxPooling1D(pool_size=3, strides=1, name="pool")(rectified)
model = keras.Model(series, keras.layers.Dense(2, name="head")(keras.layers.Flatten(name="flat")(pooled)), name="ties")


def inputs(rng):
    x = rng.standard_normal((2, 12, 4))
    x[:, 3:10, :] = -1.0 - rng.random((2, 7, 4))  # relu zeros in runs of 7: tied windows
    return {"x": x.astype("float32")}
