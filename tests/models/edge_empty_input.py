"""The only input has no elements: nothing to differentiate."""
import numpy as np
import tensorflow as tf


def model(x):
    return tf.reduce_sum(x * x)


inputs = {"x": np.zeros((0,))}
