"""A functional Keras model whose custom activation has the right gradient
everywhere (the unmodified twin of by_layer_functional.py)."""

import tensorflow as tf
import keras

WRONG = False


@tf.custom_gradient
def swish(x):
    s = tf.math.sigmoid(x)

    def grad(dy):
        true = s + x * s * (1 - s)
        return dy * (tf.where(x > 1.0, 0.5 * true, true) if WRONG else true)

    return x * s, grad


class Swish(keras.layers.Layer):
    def call(self, x):
        return swish(x)


features = keras.Input((6,))
hidden = keras.layers.Dense(8, name="d1")(features)
model = keras.Model(features, keras.layers.Dense(3, name="d2")(Swish(name="swish")(hidden)), name="net")


def inputs(rng):
    return {"x": 2.0 * rng.standard_normal((4, 6)).astype("float32")}
