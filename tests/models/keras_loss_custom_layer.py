"""A custom Keras layer trained with MSE; its tf.custom_gradient is wrong.

softsign(z) = z / (1 + |z|) has derivative 1 / (1 + |z|)**2; `softsign` below
returns 1 / (1 + |z|) (the square is missing), `softsign_fixed` the right one.
`model` uses the buggy layer, `fixed` (FILE.py:fixed) the correct one; both
have the same weights, so only the gradient of the hidden layer differs.
"""

import keras
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def softsign(z):
    def grad(upstream):
        return upstream / (1.0 + tf.abs(z))  # BUG: should be divided by (1 + |z|)**2

    return z / (1.0 + tf.abs(z)), grad


@tf.custom_gradient
def softsign_fixed(z):
    def grad(upstream):
        return upstream / (1.0 + tf.abs(z)) ** 2

    return z / (1.0 + tf.abs(z)), grad


class SoftsignDense(keras.layers.Layer):
    """x W + b through softsign; `correct` picks the gradient."""

    def __init__(self, units, correct=False, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.correct = correct

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.bias = self.add_weight(shape=(self.units,), initializer="random_normal", name="bias")

    def call(self, x):
        activation = softsign_fixed if self.correct else softsign
        return activation(tf.matmul(x, self.kernel) + self.bias)


def network(correct):
    return keras.Sequential([
        keras.Input((3,)),
        SoftsignDense(4, correct=correct, name="hidden"),
        keras.layers.Dense(1, name="out"),
    ])


model = network(correct=False)
fixed = network(correct=True)
fixed.set_weights(model.get_weights())
loss = "mse"


def inputs(rng):
    return {
        "x": rng.standard_normal((5, 3)).astype("float32"),
        "y": rng.standard_normal((5, 1)).astype("float32"),
    }
