"""A correct Keras model under the ``mixed_bfloat16`` policy (bfloat16 outputs).

Its variables are float32 but every layer computes in bfloat16, so checked in
its own dtypes (``--native-dtype``) the steps and tolerances must come from
bfloat16, the compute dtype. Its outputs are bfloat16, which numpy does not
count as floating: they must still be found and checked.
"""

import keras
import numpy as np

keras.utils.set_random_seed(2)
policy = keras.mixed_precision.DTypePolicy("mixed_bfloat16")
model = keras.Sequential([
    keras.Input((3,)),
    keras.layers.Dense(4, activation="tanh", dtype=policy),
    keras.layers.Dense(1, dtype=policy),
])
inputs = {"x": np.array([[0.4, -0.2, 0.9], [1.0, 0.3, -0.5]], dtype=np.float32)}
