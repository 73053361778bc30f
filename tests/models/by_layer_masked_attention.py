"""Keras' MultiHeadAttention over a padded batch in a subclassed model: the
embedding (``mask_zero``) attaches its mask to its output, and the attention
reads the query's mask from the query itself (and deletes it there), the key's
from the ``value_mask`` that ``Layer.__call__`` fills in. Token 0 is padding:
the last step of the first sequence, the last two of the second."""

import keras
import numpy as np

keras.utils.set_random_seed(0)


class Net(keras.Model):
    def __init__(self):
        super().__init__(name="net")
        self.embed = keras.layers.Embedding(10, 4, mask_zero=True, name="embed")
        self.attend = keras.layers.MultiHeadAttention(2, 2, name="attend")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, ids):
        h = self.embed(ids)
        return self.head(self.attend(h, h))


model = Net()
inputs = {"ids": np.array([[1, 2, 3, 0], [4, 5, 0, 0]], "int32")}
model(inputs["ids"])
