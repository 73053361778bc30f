"""hub_bert_base.py with one wrong custom activation inside: the feed-forward
GELU of transformer_layer_5 is a tf.custom_gradient whose derivative is 0.9
times the right one. The check must fail and name transformer_layer_5."""
import keras
import keras_hub
import numpy as np
import tensorflow as tf

keras.utils.set_random_seed(0)
model = keras_hub.models.BertBackbone(
    vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072,
    max_sequence_length=512, dropout=0.0,
)
inputs = {
    "token_ids": np.arange(1, 33).reshape(1, 32),
    "segment_ids": np.zeros((1, 32), "int32"),
    "padding_mask": np.ones((1, 32), "int32"),
}


@tf.custom_gradient
def wrong_gelu(x):
    y = tf.nn.gelu(x, approximate=False)

    def grad(dy):
        # d/dx [x Phi(x)] = Phi(x) + x phi(x); scaled by 0.9: the bug.
        cdf = 0.5 * (1.0 + tf.math.erf(x / np.sqrt(2.0)))
        pdf = tf.exp(-0.5 * tf.square(x)) / np.sqrt(2.0 * np.pi)
        return dy * 0.9 * (cdf + x * pdf)

    return y, grad


model.get_layer("transformer_layer_5")._feedforward_intermediate_dense.activation = wrong_gelu
