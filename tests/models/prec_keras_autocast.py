"""A correct model whose Keras layer autocasts its float64 input to float32.

The Dense layer is built with the default float32 policy, so Keras casts the
promoted float64 input to float32 and computes in float32.
"""

import keras
import numpy as np
import tensorflow as tf

keras.utils.set_random_seed(3)
dense = keras.layers.Dense(4, activation="tanh")
dense.build((None, 3))


def model(x):
    return tf.reduce_sum(tf.cast(dense(x), tf.float64) ** 2)


inputs = {"x": np.array([[0.5, -0.3, 1.1], [0.2, 0.9, -0.6]])}
