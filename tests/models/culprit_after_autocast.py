"""A wrong tf.custom_gradient after a Keras layer that autocasts to float32.

The Dense layer (float32 policy) casts the float64 input to float32, so the
custom gradient runs in float32; its gradient returns cos(x) for
d/dx sin(2 x) = 2 cos(2 x). The autocast ``Cast`` is correct.
"""

import keras
import numpy as np
import tensorflow as tf

keras.utils.set_random_seed(5)
dense = keras.layers.Dense(3)
dense.build((None, 2))


@tf.custom_gradient
def wave(x):
    def grad(upstream):
        return upstream * tf.cos(x)  # BUG: should be 2 * cos(2 x)

    return tf.sin(2.0 * x), grad


def model(x):
    return tf.reduce_sum(wave(dense(x)))


inputs = {"x": np.array([[0.4, -0.3], [0.8, 0.1]])}
