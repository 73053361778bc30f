"""keras-hub's FNetEncoder (issue 35): it mixes tokens with the real part of a
2-D FFT computed in single precision (a float32 cast, then complex64) inside a
model checked in float64. Built from its constructor with a tiny config, its
weights seeded (no download). Its gradient is right: checked at the precision
the FFT computes in, it passes."""

import keras
import keras_hub
import numpy as np

keras.utils.set_random_seed(3)
model = keras_hub.layers.FNetEncoder(intermediate_dim=8)
model.build((1, 8, 4))
inputs = {"x": np.random.default_rng(0).standard_normal((1, 8, 4))}
wrt = ["x"]
