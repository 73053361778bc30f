"""A Keras Dense stack under the mixed_float16 policy (gradcli issue 10), checked
the default way (promoted to float64 through a float64 clone). Right verdict: pass.
"""

import keras
import numpy as np

RIGHT = "pass"

keras.utils.set_random_seed(2)
policy = keras.mixed_precision.DTypePolicy("mixed_float16")
model = keras.Sequential([
    keras.Input((3,), name="x"),
    keras.layers.Dense(4, activation="tanh", dtype=policy),
    keras.layers.Dense(1, dtype=policy),
])
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
