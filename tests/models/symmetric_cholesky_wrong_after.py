"""A Cholesky factor, then a cube whose custom gradient is 2 x**2 (it should
be 3 x**2): the cube is wrong, TensorFlow's Cholesky is not."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def cube(x):
    def grad(upstream):
        return upstream * 2.0 * x * x  # BUG: d/dx x**3 = 3 x**2

    return x * x * x, grad


def model(A):
    return tf.reduce_sum(cube(tf.linalg.cholesky(A)))


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"A": m @ m.T + 3.0 * np.eye(3)}
