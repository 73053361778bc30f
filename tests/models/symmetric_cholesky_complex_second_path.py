"""logdet(A) through the Cholesky, plus a second path from A through complex
values: sum(W * real(z^2)), z = complex(identity(A), 0), where the user's
identity has a gradient that transposes its upstream gradient. Along
symmetric directions the two agree, so only the antisymmetric directions see
the bug: the symmetric rule must see the path through the complex tensors."""
import numpy as np
import tensorflow as tf

W = np.array([[0.5, -1.0, 2.0], [0.3, 0.7, -0.4], [1.5, 0.2, -0.9]])


@tf.custom_gradient
def identity(x):
    def grad(upstream):
        return tf.linalg.matrix_transpose(upstream)  # BUG

    return tf.identity(x), grad


def model(A):
    z = tf.complex(identity(A), tf.zeros_like(A))
    return tf.linalg.logdet(A) + tf.reduce_sum(tf.constant(W, A.dtype) * tf.math.real(z * z))


def inputs(rng):
    m = rng.standard_normal((3, 3))
    return {"A": m @ m.T + 3.0 * np.eye(3)}
