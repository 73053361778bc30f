"""A tiny GPT-2 style block (pre-norm causal self-attention, Keras's own
``MultiHeadAttention`` whose softmax masks the future with -1e9, then a
pre-norm feed-forward) whose GELU has a custom gradient 10% too large
(``tf.custom_gradient``), between an embedding and a final layer norm.
TensorFlow's own ops around the GELU, the masked softmax among them, are
right: a culprit may name the GELU only."""

import math

import keras
import tensorflow as tf

WRONG = True


@tf.custom_gradient
def gelu(x):
    cdf = 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))

    def grad(dy):
        true = cdf + x * tf.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return dy * (1.1 * true if WRONG else true)

    return x * cdf, grad


class Block(keras.layers.Layer):
    def __init__(self, width=4, heads=2, **kwargs):
        super().__init__(**kwargs)
        self.width, self.heads = width, heads
        kept = {"use_bias": False, "dtype": self.dtype_policy}
        norm = {"epsilon": 1e-5, "center": False, "scale": False, "dtype": self.dtype_policy}
        self.norm_1 = keras.layers.LayerNormalization(**norm, name="norm_1")
        self.attention = keras.layers.MultiHeadAttention(heads, width // heads, **kept, name="attention")
        self.norm_2 = keras.layers.LayerNormalization(**norm, name="norm_2")
        self.up = keras.layers.Dense(2 * width, **kept, name="up")
        self.down = keras.layers.Dense(width, **kept, name="down")

    def call(self, x):
        h = self.norm_1(x)
        x = x + self.attention(h, h, use_causal_mask=True)
        return x + self.down(gelu(self.up(self.norm_2(x))))

    def get_config(self):
        return {**super().get_config(), "width": self.width, "heads": self.heads}


tokens = keras.Input((4,), dtype="int32")
hidden = keras.layers.Embedding(50, 4, name="embedding")(tokens)
model = keras.Model(tokens, keras.layers.LayerNormalization(name="final_norm")(Block(name="block")(hidden)), name="gpt")


def inputs(rng):
    return {"token_ids": rng.integers(0, 50, (1, 4)).astype("int32")}
