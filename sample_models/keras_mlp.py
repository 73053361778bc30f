"""A small Keras MLP: 4 -> 8 (tanh) -> 2, differentiated with respect to its data and weights.

The outputs are the network's predictions for a batch of 3 examples; gradcli
checks every weight (dense/kernel, dense/bias, ...) and the data x against each output.
"""

import keras
import numpy as np

model = keras.Sequential(
    [
        keras.Input((4,)),
        keras.layers.Dense(8, activation="tanh"),
        keras.layers.Dense(2),
    ]
)


def inputs(rng: np.random.Generator):
    return {"x": rng.standard_normal((3, 4)).astype("float32")}
