"""Keras' MultiHeadAttention over a padded batch in a subclassed model: the
embedding (``mask_zero``) attaches its mask to its output, and the attention
reads the query's mask from the query itself (and deletes it there), the key's
from the ``value_mask`` that ``Layer.__call__`` fills in. Token 0 is padding:
the last step of the first sequence, the last two of the second. ``twice``:
the attention is called again on the tokens reversed (same shapes and
weights, the padding at the start)."""

import keras
import numpy as np
from keras import ops

ids = np.array([[1, 2, 3, 0], [4, 5, 0, 0]], "int32")


class Net(keras.Model):
    def __init__(self, twice: bool):
        super().__init__(name="net")
        self.twice = twice
        self.embed = keras.layers.Embedding(10, 4, mask_zero=True, name="embed")
        self.attend = keras.layers.MultiHeadAttention(2, 2, name="attend")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, ids):
        forward = self.embed(ids)
        attended = self.attend(forward, forward)
        if self.twice:
            backward = self.embed(ops.flip(ids, axis=1))
            attended = ops.concatenate([attended, self.attend(backward, backward)], axis=1)
        return self.head(attended)


def net(twice: bool) -> Net:
    keras.utils.set_random_seed(0)
    model = Net(twice)
    model(ids)
    return model
