"""Outputs must be a flat dict of tensors, not a nested one."""
import tensorflow as tf


def model(x):
    return {"loss": tf.reduce_sum(x * x), "parts": {"a": x, "b": 2 * x}}


inputs = {"x": [1.0, 2.0]}
