"""`inputs` holds a tf.string tensor (its .numpy() is an object array of bytes)."""
import tensorflow as tf


def model(x, s):
    return x * x


inputs = {"x": [1.0, 2.0], "s": tf.constant(["a", "b"])}
