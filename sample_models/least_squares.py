"""Least squares f(w) = sum((A w - b)^2) with a fixed 6 x 3 matrix A.

Closed form: gradient 2 A^T (A w - b); Hessian 2 A^T A, the same at every w,
positive definite when A has full column rank: the loss is convex.
"""

import numpy as np
import tensorflow as tf


def model(w, A, b):
    return tf.reduce_sum((tf.linalg.matvec(A, w) - b) ** 2)


def inputs(rng: np.random.Generator):
    return {
        "w": rng.standard_normal(3),
        "A": rng.standard_normal((6, 3)),
        "b": rng.standard_normal(6),
    }


wrt = ["w"]
