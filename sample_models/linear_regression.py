"""The cost of linear regression, as in the `tf.gradients(cost, [W, b])` example.

cost = mean((X W + b - y)^2) over n examples. Closed form:
d cost / d W = 2/n X^T (X W + b - y),  d cost / d b = 2/n sum(X W + b - y).
"""

import numpy as np
import tensorflow as tf


def model(W, b, X, y):
    residual = tf.matmul(X, W) + b - y
    return tf.reduce_mean(residual**2)


def inputs(rng: np.random.Generator):
    X = rng.standard_normal((8, 3))
    return {
        "W": rng.standard_normal((3, 1)),
        "b": np.array([0.5]),
        "X": X,
        "y": X @ np.array([[1.0], [-2.0], [0.5]]) + 0.1 * rng.standard_normal((8, 1)),
    }


wrt = ["W", "b"]
