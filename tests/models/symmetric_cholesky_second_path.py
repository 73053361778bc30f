"""logdet(A) through the Cholesky, plus a second path from A that does not go
through it: sum(W * identity(A)), where the user's identity has a custom
gradient that transposes its upstream gradient (it should pass it on as it
is). Along symmetric directions the two agree (<W^T, S> = <W, S>), so only
the antisymmetric directions see the bug: the symmetric rule must not excuse
them, since A reaches the output by a path the Cholesky does not read."""
import numpy as np
import tensorflow as tf

W = np.array([[0.5, -1.0, 2.0], [0.3, 0.7, -0.4], [1.5, 0.2, -0.9]])


@tf.custom_gradient
def identity(x):
    def grad(upstream):
        return tf.linalg.matrix_transpose(upstream)  # BUG: the identity passes upstream on untransposed

    return tf.identity(x), grad


def model(A):
    return tf.linalg.logdet(A) + tf.reduce_sum(tf.constant(W, A.dtype) * identity(A))


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"A": m @ m.T + 3.0 * np.eye(3)}
