"""hub_bert_base.py with one wrong custom activation inside: the feed-forward
GELU of transformer_layer_5 is a tf.custom_gradient whose derivative is 0.9
times the right one. The check must fail and name transformer_layer_5."""
import numpy as np
import tensorflow as tf
from hub_bert_base import inputs, model  # noqa: F401 - BERT-base's shapes and weights, as there


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
