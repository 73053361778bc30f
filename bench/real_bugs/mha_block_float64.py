"""A correct functional Keras attention block: MultiHeadAttention (its query,
key, value and output projections are sublayers built inside the layer), a
residual LayerNormalization and a Dense head. It must rebuild in float64.
"""

import keras
import numpy as np

keras.utils.set_random_seed(5)
tokens = keras.Input((4, 6))
attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)(tokens, tokens)
normed = keras.layers.LayerNormalization()(tokens + attended)
model = keras.Model(tokens, keras.layers.Dense(2)(normed))

inputs = {"x": np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)}

# bench/real_bugs: A correct MultiHeadAttention block, which must rebuild in float64.
RIGHT = "pass"
