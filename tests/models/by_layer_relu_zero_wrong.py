"""A hand-written relu whose gradient at exactly 0 is 5, after a relu: its
input holds the first relu's zeros, exact ties of one another. Each zero is a
kink of its own (one-sided slopes 0 and c_i of the layer's cotangent), and 5
c_i lies outside them: no subgradient of relu at 0 (those are [0, 1]). Moved
together the zeros stay on the threshold, so the tie rule cannot call the
kink a tie's, and the layer fails; moved off the zeros it would pass. The
twin ``by_layer_relu_zero.py`` uses Keras' ReLU twice (gradient 0 at 0)."""

import keras
import tensorflow as tf

GRADIENT_AT_ZERO = 5.0


@tf.custom_gradient
def my_relu(x):
    def grad(dy):
        at_zero = tf.cast(tf.equal(x, 0.0), x.dtype) * GRADIENT_AT_ZERO
        return dy * (tf.cast(x > 0, x.dtype) + at_zero)

    return tf.nn.relu(x), grad


class MyRelu(keras.layers.Layer):
    def call(self, x):
        return my_relu(x)


series = keras.Input((12, 4))
rectified = keras.layers.ReLU(name="relu")(series)
again = MyRelu(name="again")(rectified)
model = keras.Model(series, keras.layers.Dense(2, name="head")(keras.layers.Flatten(name="flat")(again)), name="zeros")


def inputs(rng):
    return {"x": rng.standard_normal((2, 12, 4)).astype("float32")}
