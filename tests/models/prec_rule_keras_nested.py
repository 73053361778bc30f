"""A correct functional Keras model built from a nested functional model, a
layer shared by two calls and a BatchNormalization (inference mode), with
float32 layers: it must rebuild in float64 with the same weights.

h = shared(shared(x)); g = inner(h) = tanh(h W1 + b1);
n = (g - mean) / sqrt(var + 1e-3) * gamma + beta; y = n W2 + b2.
"""

import keras
import numpy as np

keras.utils.set_random_seed(7)
inner_in = keras.Input((3,))
inner = keras.Model(inner_in, keras.layers.Dense(4, activation="tanh")(inner_in), name="inner")
x = keras.Input((3,))
shared = keras.layers.Dense(3, name="shared")
features = inner(shared(shared(x)))
normed = keras.layers.BatchNormalization(name="norm")(features)
model = keras.Model(x, keras.layers.Dense(2, name="head")(normed))

inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
