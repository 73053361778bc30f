"""Forty kinks hit exactly: y = sum(relu(x)) at x = 0 in every element. Each
element's one-sided slopes are 0 (left) and 1 (right); TensorFlow's relu
gradient at 0 is 0, a valid subgradient: every element fails the element rule
(the central difference reads 1/2) and every one is a kink the ladder earns,
so the ladders examine all forty columns (tests/test_diagnose.py)."""

import numpy as np
import tensorflow as tf


def model(x):
    return tf.reduce_sum(tf.nn.relu(x))


inputs = {"x": np.zeros(40)}
