"""A Keras layer with no weights given as the model, fed float64 data (numpy's
default): ``AveragePooling3D`` has no float64 kernel on CPU, so the float64
rebuild cannot run. Keras converts the data to the layer's float32 (its input
dtype), which is the model's own dtype: the check runs there.

An average pool of 2x2x2 windows: every output's derivative with respect to
each of its window's 8 inputs is 1/8, and 0 elsewhere.
"""

import keras
import numpy as np

model = keras.layers.AveragePooling3D(2)
inputs = {"x": np.random.default_rng(0).uniform(-1.0, 1.0, (1, 4, 4, 2, 1))}
