"""Keras' own MultiHeadAttention with large values: every gradient is right.
Its key bias adds the same logit to every key of a query, which the softmax
ignores, so its derivative is exactly 0; with values this large, the finite
differences of a projection carry more round-off than atol, and the layer
pass's quick check leaves that one input inconclusive. The unit's other
inputs keep the quick check's verdicts; the key bias alone is checked again,
element by element."""

import keras
import numpy as np

keras.utils.set_random_seed(0)
tokens = keras.Input((12, 24))
attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=12, name="attention")
attended = attention(tokens, tokens)
model = keras.Model(tokens, keras.layers.Dense(4, name="head")(attended), name="attention_key_bias")
value = attention.value_dense.kernel
value.assign(3000.0 * np.asarray(value))  # large values, logits as they were


def inputs(rng):
    return {"x": rng.standard_normal((1, 12, 24)).astype("float32")}
