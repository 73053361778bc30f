"""Twin fixtures of nested and sparse values (right and wrong differ only by
the factor a custom gradient is off by).

* ``pytree_model(b_factor)``: jax's convention, ``params`` a dict of arrays and
  a custom gradient that returns the parameters' gradient as a dict;
  y = w * x + b elementwise, the leaves params.w, params.b and x. The rule
  gives ``b_factor * dy`` for params.b (right: 1).
* ``sparse_model(factor)``: a tf.SparseTensor input whose stored values pass
  through a custom square: y = S @ w with S the sparse input's pattern holding
  the squares of its values, y[r] = sum over row r's stored (c, v) of
  v**2 * w[c], so dy[r]/dv = 2 v w[c] and dy[r]/dw[c] = v**2. The rule gives
  ``factor * v * dy`` (right: 2).
"""

import numpy as np
import tensorflow as tf


def pytree_model(b_factor):
    @tf.custom_gradient
    def affine(params, x):
        w, b = params["w"], params["b"]

        def grad(dy):
            return {"w": dy * x, "b": b_factor * dy}, dy * w

        return w * x + b, grad

    def model(params, x):
        y = affine(params, x)
        return {"loss": 0.5 * tf.reduce_sum(y * y), "parts": {"y": y}}

    inputs = {
        "params": {"w": np.array([0.5, -1.0, 2.0]), "b": np.array([0.1, 0.2, -0.3])},
        "x": np.array([1.0, 2.0, -1.5]),
    }
    return model, inputs


def sparse_model(factor):
    @tf.custom_gradient
    def square(v):
        def grad(dy):
            return factor * v * dy

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
    return model, inputs
