"""A correct model whose Keras layer autocasts its float64 input to float32.

The Dense layer is made inside the model function with the default float32
policy and constant weights, so gradcli cannot promote its weights (they are
no module-level inputs): Keras casts the float64 input to float32 and the
layer computes in float32 on every call.
"""

import keras
import numpy as np
import tensorflow as tf

KERNEL = np.array([[0.4, -0.2, 0.1, 0.3], [-0.5, 0.6, 0.2, -0.1], [0.3, 0.1, -0.4, 0.2]])


def model(x):
    dense = keras.layers.Dense(
        4, activation="tanh", kernel_initializer=keras.initializers.Constant(KERNEL),
        bias_initializer="zeros",
    )
    return tf.reduce_sum(tf.cast(dense(x), tf.float64) ** 2)


inputs = {"x": np.array([[0.5, -0.3, 1.1], [0.2, 0.9, -0.6]])}
