"""A correct float32 model whose value (about 6e4) swamps its derivative (1e-3):
float32 differences cannot resolve the gradient at all."""
import numpy as np
import tensorflow as tf


def model(x):
    return tf.reduce_sum(1e4 + 1e-3 * x)


inputs = {"x": np.linspace(1.0, 3.0, 6).astype(np.float32)}
