"""The twin of ``by_layer_relu_zero_wrong.py``: Keras' ReLU after a ReLU. At
the first relu's zeros (exact ties of one another) the second's gradient is 0,
within each zero's one-sided slopes: a subgradient."""

import keras

series = keras.Input((12, 4))
rectified = keras.layers.ReLU(name="relu")(series)
again = keras.layers.ReLU(name="again")(rectified)
model = keras.Model(series, keras.layers.Dense(2, name="head")(keras.layers.Flatten(name="flat")(again)), name="zeros")


def inputs(rng):
    return {"x": rng.standard_normal((2, 12, 4)).astype("float32")}
