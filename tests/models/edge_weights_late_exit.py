"""A model with a module-level tf.Variable (an input by path) that ends the
process with sys.exit(0) once the analysis is under way."""
import sys

import tensorflow as tf

w = tf.Variable([1.0, 2.0], dtype=tf.float64)
calls = []


def model(x):
    calls.append(1)
    if len(calls) > 4:
        sys.exit(0)
    return w * x


inputs = {"x": [1.0, 2.0]}
