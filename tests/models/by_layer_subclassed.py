"""A subclassed Keras model holding a nested Sequential model and a custom
layer whose gradient is wrong (doubled) where its input is negative."""

import tensorflow as tf
import keras


@tf.custom_gradient
def softplus(x):
    def grad(dy):
        true = tf.math.sigmoid(x)
        return dy * tf.where(x < 0.0, 2.0 * true, true)

    return tf.math.softplus(x), grad


class Softplus(keras.layers.Layer):
    def call(self, x):
        return softplus(x)


class Outer(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.Sequential([keras.layers.Dense(5, name="inner_dense")], name="inner")
        self.act = Softplus(name="act")
        self.head = keras.layers.Dense(2, name="head")

    def call(self, x, training=None):
        return self.head(self.act(self.inner(x, training=training)))


model = Outer(name="outer")


def inputs(rng):
    return {"x": rng.standard_normal((3, 4)).astype("float32")}
