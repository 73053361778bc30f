"""Overlapping max pools (3x3, stride 2) over relu zeros, as in InceptionV3's
stem: most of the pool's inputs are exact zeros (a bias of -1.5 before the
relu), so most windows hold tied maxima at 0 and most elements sit in several
windows. TensorFlow's gradient gives each window's gradient to its first
maximum: the gradient of one active piece, a valid subgradient, though outside
a single element's one-sided slopes where two windows' upstream gradients
differ in sign. ``by_layer_ties_wrong.py`` is a wrong gradient at ties.

Checked with a small budget, the failing pool's element-wise re-check runs on a
random sample of its 24,336 inputs: a sampled kink's tied partners are mostly
not in the sample, so the mixed difference of ``diagnose.shared_kinks`` sees no
shared kink, and the tie rule needs the ordered tie break
(``by_layer._ordered_tie_break``), as InceptionV3's stem pools did.
"""

import keras
import numpy as np

keras.utils.set_random_seed(0)
features = keras.Input((41, 41, 3))
y = keras.layers.Conv2D(16, 3, bias_initializer=keras.initializers.Constant(-1.5), name="conv")(features)
y = keras.layers.ReLU(name="relu")(y)
y = keras.layers.MaxPooling2D((3, 3), strides=(2, 2), name="pool")(y)
y = keras.layers.Conv2D(4, 1, name="mix")(y)
model = keras.Model(features, keras.layers.GlobalAveragePooling2D()(y), name="stem")
inputs = {"x": np.random.default_rng(5).uniform(-1.0, 1.0, (1, 41, 41, 3)).astype("float32")}
