"""One Keras MultiHeadAttention called twice in a subclassed model, on the
same tokens and on them reversed: the same shapes and weights, so one traced
local function serves both calls, but the padding (token 0) sits at the end of
each sequence in the first call and at the start in the second. The
attention reads the query's mask from the query: the masks the two calls'
arguments carry differ, and each call is checked with its own."""

import keras
import numpy as np
from keras import ops

keras.utils.set_random_seed(0)


class Net(keras.Model):
    def __init__(self):
        super().__init__(name="net")
        self.embed = keras.layers.Embedding(10, 4, mask_zero=True, name="embed")
        self.attend = keras.layers.MultiHeadAttention(2, 2, name="attend")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, ids):
        forward, backward = self.embed(ids), self.embed(ops.flip(ids, axis=1))
        return self.head(ops.concatenate([self.attend(forward, forward), self.attend(backward, backward)], axis=1))


model = Net()
inputs = {"ids": np.array([[1, 2, 3, 0], [4, 5, 0, 0]], "int32")}
model(inputs["ids"])
