"""Twin fixtures for the forms TensorFlow returns derivatives in (one factory:
right and wrong differ only by ``scale``, the factor a wrong gradient is off by).

* ``gather_model``: a lookup through ``tf.gather``, whose gradient is
  ``tf.IndexedSlices``; with ``scale`` a ``tf.custom_gradient`` lookup that
  returns its own ``IndexedSlices`` (rows ``scale * dy``).
  f(table, idx) = sum(sin(table[idx]) * weights): df/dtable[r, j] =
  cos(table[r, j]) * sum over k with idx[k] = r of weights[k, j].
* ``segment_model``: ``keras.ops.segment_sum`` of sin(x) * weights over
  row segments, whose forward-mode derivative TensorFlow returns as
  ``tf.IndexedSlices`` (it transposes the op's gradient, a gather):
  y[s, j] = sum over i with SEG[i] = s of sin(x[i, j]) * SEG_WEIGHTS[i, j].
* ``scatter_model``: ``keras.ops.scatter`` of sin(u) into rows (repeated rows
  summed) times weights: y[r, j] = SCATTER_WEIGHTS[r, j] * sum over k with
  ROWS[k] = r of sin(u[k, j]).
* ``variable_model``: a ``tf.custom_gradient`` that reads a captured
  ``tf.Variable`` of a ``tf.Module`` and returns its gradient through
  ``variables=``: y = tanh(x * w) (w broadcast over rows); ``scale``
  multiplies the variable's gradient only.
"""

import numpy as np
import tensorflow as tf

TABLE = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5], [-0.8, 0.9, 0.2], [0.6, -0.3, 1.4]])
IDX = np.array([0, 2, 2, 3])
WEIGHTS = np.array([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0], [2.0, 0.5, 1.0], [-1.5, 1.0, 0.75]])


def gather_model(scale=None):
    if scale is None:
        lookup = tf.gather
    else:
        @tf.custom_gradient
        def lookup(table, idx):
            def grad(dy):
                rows = tf.IndexedSlices(scale * dy, idx, tf.shape(table, out_type=idx.dtype))
                return rows, None
            return tf.gather(table, idx), grad

    def model(table, idx):
        return tf.reduce_sum(tf.sin(lookup(table, idx)) * WEIGHTS)

    return model, {"table": TABLE.tolist(), "idx": IDX.tolist()}


def gather_gradient():
    """The closed form of ``gather_model``'s gradient with respect to table."""
    g = np.zeros_like(TABLE)
    for k, r in enumerate(IDX):
        g[r] += np.cos(TABLE[r]) * WEIGHTS[k]
    return g


SEG = np.array([0, 0, 1, 2, 2])
SEG_X = np.array([[0.3, -1.2], [0.7, 1.1], [0.4, -0.5], [-0.8, 0.9], [0.2, 1.4]])
SEG_WEIGHTS = np.array([[1.0, -2.0], [0.5, 0.25], [1.5, -1.0], [2.0, 0.5], [-1.5, 0.75]])


def segment_model():
    from keras import ops

    def model(x):
        return ops.segment_sum(ops.sin(x) * SEG_WEIGHTS, SEG, num_segments=3)

    return model, {"x": SEG_X.tolist()}


def segment_jacobian():
    """d y[s, j] / d x[i, k] of ``segment_model``, closed form: [3, 2, 5, 2]."""
    jacobian = np.zeros((3, 2) + SEG_X.shape)
    for i, s in enumerate(SEG):
        for j in range(SEG_X.shape[1]):
            jacobian[s, j, i, j] = np.cos(SEG_X[i, j]) * SEG_WEIGHTS[i, j]
    return jacobian


ROWS = np.array([0, 2, 2, 3])
SCATTER_U = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5], [-0.8, 0.9, 0.2], [0.6, -0.3, 1.4]])
SCATTER_WEIGHTS = np.array([[1.0, -2.0, 0.5], [0.3, 0.3, 0.3], [2.0, 0.5, 1.0], [-1.5, 1.0, 0.75], [0.5, 0.5, 0.5]])


def scatter_model():
    from keras import ops

    def model(u):
        return ops.scatter(ROWS[:, None], ops.sin(u), SCATTER_WEIGHTS.shape) * SCATTER_WEIGHTS

    return model, {"u": SCATTER_U.tolist()}


def scatter_jacobian():
    """d y[r, j] / d u[k, l] of ``scatter_model``, closed form: [5, 3, 4, 3]."""
    jacobian = np.zeros(SCATTER_WEIGHTS.shape + SCATTER_U.shape)
    for k, r in enumerate(ROWS):
        for j in range(SCATTER_U.shape[1]):
            jacobian[r, j, k, j] = np.cos(SCATTER_U[k, j]) * SCATTER_WEIGHTS[r, j]
    return jacobian


X = np.array([[1.0, 2.0], [3.0, -4.0], [0.5, 1.5]])
W0 = np.array([1.5, -0.5])


class Scaled(tf.Module):
    """y = x * w through a tf.custom_gradient that reads the module's variable."""

    def __init__(self, scale):
        super().__init__(name="scaled")
        self.w = tf.Variable(W0, dtype=tf.float64)
        self.scale = scale

    def __call__(self, x):
        @tf.custom_gradient
        def scaled(x):
            y = x * self.w

            def grad(dy, variables=None):
                return dy * self.w, [self.scale * tf.reduce_sum(dy * x, axis=0)]

            return y, grad

        return tf.tanh(scaled(x))


def variable_model(scale=1.0):
    """A module-level object holding the variable, the model calling it, inputs.
    Closed form: d sum(c * tanh(x w)) / dw[j] = sum_i c[i, j] (1 - tanh^2) x[i, j]."""
    layer = Scaled(scale)

    def model(x):
        return layer(x)

    return layer, model, {"x": X.tolist()}
