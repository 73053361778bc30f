"""A tf.function holding a while loop: y <- 1.5 sin(y), three times. TensorFlow's
forward mode cannot enter the traced function (its while loop's variant
accumulators); the JVP is taken with the body run eagerly and checked.
Closed form: dy3/dx = prod_k 1.5 cos(y_k), y_0 = x (element-wise)."""

import numpy as np
import tensorflow as tf


@tf.function
def model(x):
    i = tf.constant(0)
    _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, 1.5 * tf.sin(y)), (i, x))
    return y


inputs = {"x": np.linspace(-1.0, 1.0, 48).reshape(6, 8)}
