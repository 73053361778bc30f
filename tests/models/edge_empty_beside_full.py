"""An empty input and an empty output beside real ones.

Truth: d y / d w = I (y = w + sum(e^2)); `none` has no elements.
"""
import numpy as np
import tensorflow as tf


def model(e, w):
    return {"y": w + tf.reduce_sum(e * e), "none": w[:0]}


inputs = {"e": np.zeros((0,)), "w": [1.0, 2.0]}
