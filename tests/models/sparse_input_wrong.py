"""A tf.SparseTensor input whose stored values pass through a custom
gradient. Wrong: the custom gradient misses
the factor 2 of d(v**2)/dv.

y = S @ w with S the sparse input's pattern holding the squares of its
values: y[r] = sum over row r's stored (c, v) of v**2 * w[c], so
dy[r]/dv = 2 v w[c] and dy[r]/dw[c] = v**2."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def square(v):
    def grad(dy):
        return v * dy  # wrong: d(v * v)/dv is 2 v

    return v * v, grad


def model(x, w):
    squares = tf.SparseTensor(x.indices, square(x.values), x.dense_shape)
    return tf.sparse.sparse_dense_matmul(squares, w[:, None])[:, 0]


inputs = {
    "x": tf.SparseTensor(
        indices=[[0, 0], [0, 2], [1, 1]], values=np.array([1.0, -2.0, 3.0]), dense_shape=[2, 3]
    ),
    "w": np.array([1.0, 0.5, -1.0]),
}
