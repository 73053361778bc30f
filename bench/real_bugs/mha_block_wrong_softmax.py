"""A functional Keras attention block whose softmax gradient is 3e-4 too
large: a MultiHeadAttention subclass normalizes its scores with a
``tf.custom_gradient`` softmax whose gradient is scaled by (1 + 3e-4) (its
dropout, inactive in inference mode, makes the layer take the explicit-softmax
path). Only a float64 check resolves that; the block must rebuild in float64
and fail.
"""

import keras
import numpy as np
import tensorflow as tf

ERROR = 3e-4


@tf.custom_gradient
def loose_softmax(scores):
    probs = tf.nn.softmax(scores, axis=-1)

    def grad(upstream):
        inner = tf.reduce_sum(upstream * probs, axis=-1, keepdims=True)
        return probs * (upstream - inner) * (1.0 + ERROR)

    return probs, grad


class LooseAttention(keras.layers.MultiHeadAttention):
    def _masked_softmax(self, attention_scores, attention_mask=None):
        return loose_softmax(attention_scores)


keras.utils.set_random_seed(5)
tokens = keras.Input((4, 6))
attended = LooseAttention(num_heads=2, key_dim=3, dropout=0.1)(tokens, tokens)
normed = keras.layers.LayerNormalization()(tokens + attended)
model = keras.Model(tokens, keras.layers.Dense(2)(normed))

wrt = ["query/kernel", "key/kernel", "value/kernel"]
inputs = {"x": np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)}

# bench/real_bugs: An attention block with a softmax gradient 3e-4 off.
RIGHT = "fail"
