"""Keras MultiHeadAttention, correct (a third-party layer). Right verdict: pass."""

import keras
import numpy as np

RIGHT = "pass"

keras.utils.set_random_seed(0)
query = keras.Input((3, 4), name="query")
value = keras.Input((5, 4), name="value")
out = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)(query, value)
model = keras.Model([query, value], out)
rng = np.random.default_rng(0)
inputs = {"query": rng.standard_normal((1, 3, 4)).astype("float32"),
          "value": rng.standard_normal((1, 5, 4)).astype("float32")}
