"""The model forgets to return: None."""
import tensorflow as tf


def model(x):
    y = tf.sin(x)  # noqa: F841 - the missing return is the point
inputs = {"x": [1.0, 2.0]}
