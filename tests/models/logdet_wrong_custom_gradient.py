"""A flow whose log-det is right and whose custom gradient inside the forward is wrong.

An affine coupling on R^4 (x_a = x[:, :2] kept, x_b = x[:, 2:] mapped to
x_b * exp(s) + t, s = tanh(x_a A + a), t = x_a B + b), then z -> z + tanh(z) / 2
elementwise, written as a ``tf.custom_gradient`` whose gradient forgets to
square tanh: it returns 1 + (1 - tanh(z)) / 2 for the derivative
1 + (1 - tanh(z)**2) / 2. The forward values are right, and so is
``log_det_jacobian``: sum(s) + sum(log(1 + (1 - tanh(z)**2) / 2)), from the
triangular coupling and the diagonal elementwise map. The autodiff Jacobian is
wrong on its diagonal, so its slogdet is not log|det J|.
"""

import numpy as np
import tensorflow as tf

A = np.array([[0.6, -0.4], [0.3, 0.8]])
a = np.array([0.1, -0.2])
B = np.array([[0.5, 0.2], [-0.7, 0.4]])
b = np.array([0.3, 0.1])


@tf.custom_gradient
def soft_shift(z):
    t = tf.tanh(z)

    def grad(dy):
        return dy * (1.0 + 0.5 * (1.0 - t))  # BUG: 1 - t * t

    return z + 0.5 * t, grad


def _coupling(x):
    xa, xb = x[:, :2], x[:, 2:]
    s = tf.tanh(xa @ tf.constant(A, x.dtype) + tf.constant(a, x.dtype))
    t = xa @ tf.constant(B, x.dtype) + tf.constant(b, x.dtype)
    return tf.concat([xa, xb * tf.exp(s) + t], axis=1), tf.reduce_sum(s, axis=1)


def model(x):
    return soft_shift(_coupling(x)[0])


def log_det_jacobian(x):
    z, coupling = _coupling(x)
    slope = 1.0 + 0.5 * (1.0 - tf.tanh(z) ** 2)
    return coupling + tf.reduce_sum(tf.math.log(slope), axis=1)


inputs = {"x": np.array([[0.2, -0.5, 0.7, 1.1], [-0.9, 0.4, -0.3, 0.6], [1.3, 0.8, -1.2, -0.4]])}
