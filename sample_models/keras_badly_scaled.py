"""A Keras model with badly scaled initialisations: `gradcli vjp` flags its weights.

Layer 1 (tanh, kernel 50 everywhere) saturates on inputs >= 1: tanh'(z) = 0 in
float64 for z >= 200, so its kernel's gradient vanishes. Layer 2's kernel is
1e-3 while layer 3 multiplies by 1e5, so layer 2's gradient is about 1e8 times
its own norm: exploding.
"""

import keras
import numpy as np

model = keras.Sequential(
    [
        keras.Input((2,)),
        keras.layers.Dense(4, activation="tanh", kernel_initializer=keras.initializers.Constant(50.0)),
        keras.layers.Dense(4, kernel_initializer=keras.initializers.Constant(1e-3)),
        keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(1e5)),
    ]
)

inputs = {"x": np.array([[1.0, 2.0], [3.0, 1.5]], dtype="float32")}
