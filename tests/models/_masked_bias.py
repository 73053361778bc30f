"""A Keras layer with two outputs of very different sizes, as keras-hub's T5
layers return them: its activations 0.001 tanh(x W) (size about 5e-4) and an
attention bias b holding its mask as -1e9 (the masked keys of each query).
The model takes a softmax of the bias, so its own output is of size 1. In the
layer pass the unit's scalar <c, outputs> weighed the bias's -1e9 entries,
and the differences of W could not be resolved beside them (inconclusive).
``wrong``: the tanh's gradient is 1.1 times the derivative
(``tf.custom_gradient``)."""

import keras
import numpy as np
import tensorflow as tf

MASKED = -1e9


def masked_bias_model(wrong: bool):
    @tf.custom_gradient
    def scaled_tanh(z):
        y = tf.tanh(z)

        def grad(dy):
            return dy * (1.0 - y * y) * (1.1 if wrong else 1.0)

        return y, grad

    class ActivationsAndBias(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 3), initializer="glorot_uniform", name="w")
            self.b = self.add_weight(shape=(3,), initializer="random_normal", name="b")

        def call(self, x):
            activations = 0.001 * scaled_tanh(tf.matmul(x, self.w))
            keys = tf.constant(np.triu(np.ones((3, 3)), 1), self.compute_dtype)  # query i sees keys <= i
            return activations, self.b[None, :] + MASKED * keys

    class Mix(keras.layers.Layer):
        def call(self, activations, weights):
            return tf.matmul(activations, weights)

    features = keras.Input((4,))
    activations, bias = ActivationsAndBias(name="two_sizes")(features)
    weights = keras.layers.Softmax(name="softmax")(bias)  # [3 queries, 3 keys]
    mixed = Mix(name="mix")(activations, weights)
    return keras.Model(features, keras.layers.Dense(2, name="head")(mixed), name="masked_bias")


def inputs(rng):
    return {"x": rng.standard_normal((2, 4)).astype("float32")}
