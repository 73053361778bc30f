"""A nested dict output: flattened to the outputs loss, parts.a and parts.b
(tests/test_nested_values.py)."""
import tensorflow as tf


def model(x):
    return {"loss": tf.reduce_sum(x * x), "parts": {"a": x, "b": 2 * x}}


inputs = {"x": [1.0, 2.0]}
