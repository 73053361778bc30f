"""Layers that keep float32 inside a float64 check: a layer norm whose scale
and offset are created as float32 whatever its dtype policy (so the model
cannot be rebuilt in float64 and runs by switching its layers' policies), a
frozen position table kept in float32, and a Conv1D fed by an
``Input(dtype="float32")`` (as Whisper's encoder is), whose argument reaches
it in float32 before ``Layer.__call__`` casts it. Every gradient is right:
each layer must be checked in float64, none an error row."""

import keras
import numpy as np
import tensorflow as tf


class LayerNorm(keras.layers.Layer):
    """A layer norm that does not cast its weights: float32 whatever its policy."""

    def build(self, shape):
        self.gamma = self.add_weight(shape=shape[-1:], initializer="ones", dtype="float32", name="gamma")
        self.beta = self.add_weight(shape=shape[-1:], initializer="zeros", dtype="float32", name="beta")

    def call(self, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + 1e-5) * self.gamma + self.beta


class FrozenPositions(keras.layers.Layer):
    """Adds a frozen (non-trainable) float32 position table to its input."""

    def build(self, shape):
        table = np.sin(np.arange(shape[-2] * shape[-1]).reshape(shape[-2:]) / 3.0)
        self.table = self.add_weight(shape=shape[-2:], initializer=keras.initializers.Constant(table),
                                     dtype="float32", trainable=False, name="table")

    def call(self, x):
        return x + self.table


features = keras.Input((8, 4), dtype="float32")
hidden = keras.layers.Conv1D(6, 3, padding="same", name="conv")(features)
hidden = FrozenPositions(name="positions")(hidden)
model = keras.Model(features, keras.layers.Dense(2, name="head")(LayerNorm(name="norm")(hidden)), name="mixed")


def inputs(rng):
    return {"x": rng.standard_normal((2, 8, 4)).astype("float32")}
