"""A Keras LSTM behind ``Masking(0.0)``, as padded sequences are fed: the last
step of the first sequence is padding (all zeros), so Keras skips it.

The mask is ``any(x[t] != 0)``: moving one padded element off 0 by any h,
however small, unmasks the step, and the output jumps by the step's whole
effect. The function has no derivative along those elements (a discontinuity,
not a kink: f(x + h) - f(x) does not shrink with h). TensorFlow's gradient
there is the masked piece's (0). ``keras_masked_step_wrong.py`` is its twin
with a wrong gradient elsewhere.
"""

import keras
import numpy as np

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((3, 2)), keras.layers.Masking(0.0), keras.layers.LSTM(2)])
x = np.random.default_rng(3).uniform(-1.0, 1.0, (2, 3, 2)).astype(np.float32)
x[0, 2] = 0.0  # padding
inputs = {"x": x}
