"""A functional backbone kept in a module-level variable beside the model
built on it, adding no weights of its own (as keras-hub's docs write
``GPT2CausalLM(backbone=backbone)``): both hold the same trainable
variables. Inside the backbone, a custom GELU whose ``tf.custom_gradient`` is 10% too large
everywhere: the layer pass must find the backbone's layers through the
checked model and name the GELU."""

import math

import keras
import tensorflow as tf

WRONG = True


@tf.custom_gradient
def gelu(x):
    cdf = 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))

    def grad(dy):
        pdf = tf.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        true = cdf + x * pdf
        return dy * (1.1 * true if WRONG else true)

    return x * cdf, grad


class Gelu(keras.layers.Layer):
    def call(self, x):
        return gelu(x)


tokens = keras.Input((5,), name="features")
hidden = keras.layers.Dense(8, name="up")(tokens)
backbone = keras.Model(tokens, keras.layers.Dense(6, name="down")(Gelu(name="gelu")(hidden)), name="backbone")

features = keras.Input((5,))
model = keras.Model(features, 2.0 * backbone(features), name="wrapper")


def inputs(rng):
    return {"x": rng.standard_normal((3, 5)).astype("float32")}
