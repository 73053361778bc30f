"""y = x**2 elementwise on 2,000 elements with a wrong gradient (3x instead of 2x)."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def square(x):
    return x * x, lambda dy: dy * 3.0 * x


def model(x):
    return square(x)


inputs = {"x": np.linspace(0.5, 1.5, 2000)}
