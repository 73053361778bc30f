"""A wrong gradient on forty elements: y = sum(x**3) whose custom gradient is
4 x**2 where the truth is 3 x**2 (a third too large) at x = 1.1 .. 5.0. Every
element is surely a mismatch, so the ladders stop after their first batch
(tests/test_diagnose.py)."""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def cube(x):
    def grad(dy):
        return dy * 4.0 * x * x

    return x * x * x, grad


def model(x):
    return tf.reduce_sum(cube(x))


inputs = {"x": np.linspace(1.1, 5.0, 40)}
