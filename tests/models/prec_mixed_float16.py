"""A correct Keras model under the ``mixed_float16`` policy (issue 10).

Its variables are float32 but every layer computes in float16, so checked in
its own dtypes (``--native-dtype``) the steps and tolerances must come from
float16, the compute dtype.
"""

import keras
import numpy as np

keras.utils.set_random_seed(2)
policy = keras.mixed_precision.DTypePolicy("mixed_float16")
model = keras.Sequential([
    keras.Input((3,)),
    keras.layers.Dense(4, activation="tanh", dtype=policy),
    keras.layers.Dense(1, dtype=policy),
])
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
