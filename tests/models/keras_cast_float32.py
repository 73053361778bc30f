"""A correct Keras model whose RMS norm casts to float32 inside, the mixed
precision idiom ``keras.ops.cast(x, "float32")`` (at least float32 around an
unstable op), as keras-hub's norms do: the float64 check keeps the cast
float64 and says so."""
import keras
import numpy as np
from keras import ops


class CastingRMSNorm(keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(name="scale", shape=(shape[-1],), initializer="ones")

    def call(self, x):
        dtype = x.dtype
        x = ops.cast(x, "float32")
        x = x * ops.rsqrt(ops.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        return ops.cast(x, dtype) * self.scale


keras.utils.set_random_seed(0)
x = keras.Input((5,), name="x")
model = keras.Model(x, CastingRMSNorm()(keras.layers.Dense(5, activation="tanh")(x)))
inputs = {"x": np.random.default_rng(0).standard_normal((2, 5))}
