"""A SparseTensor output: compared in its dense form, x * x
(tests/test_nested_values.py)."""
import tensorflow as tf


def model(x):
    return tf.sparse.from_dense(x * x)


inputs = {"x": [1.0, 0.0, 2.0]}
