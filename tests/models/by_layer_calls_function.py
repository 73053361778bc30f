"""by_layer_functional.py's network, right, with its activation's body a
tf.function: the model's trace calls a function, so its whole-model joint
check runs after the layer pass, not beside it (forward mode through a called
function is also taken with the functions run eagerly, a process-wide switch)."""

import tensorflow as tf
import keras


@tf.function
def swish(x):
    return x * tf.math.sigmoid(x)


class Swish(keras.layers.Layer):
    def call(self, x):
        return swish(x)


features = keras.Input((6,))
hidden = keras.layers.Dense(8, name="d1")(features)
model = keras.Model(features, keras.layers.Dense(3, name="d2")(Swish(name="swish")(hidden)), name="net")


def inputs(rng):
    return {"x": 2.0 * rng.standard_normal((4, 6)).astype("float32")}
