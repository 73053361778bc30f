"""`inputs` holds a complex array: checked as its real and imaginary parts
(x.real, x.imag), never cast to its real part (tests/test_nested_values.py).
Re(x * x) = a**2 - b**2 for x = a + ib: d/da = 2a, d/db = -2b."""
import numpy as np
import tensorflow as tf


def model(x):
    return tf.math.real(x * x)


inputs = {"x": np.array([1 + 1j, 2 - 1j])}
