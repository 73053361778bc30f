"""A tf.function that fails when run (a check that the input is positive):
TensorFlow's message starts "Graph execution error:" and gives the cause
after the frames of the node; the error line shows the cause."""

import tensorflow as tf


@tf.function
def model(x):
    tf.debugging.assert_positive(x, message="x must be positive")
    return x * x


inputs = {"x": [1.0, -2.0]}
