"""A per-channel scale whose custom gradient has the wrong shape.

f(x, scale, shift) = sum(sin(x * scale + shift)) over a batch of 4 rows of 3
channels. ``affine``'s gradient returns, for ``scale``, the sum over every
element (a scalar) instead of the per-channel sum (shape (3,)): a
shape-broadcasting bug. Its gradients for ``x`` and ``shift`` are right:
d f / d x = cos(z) * scale, d f / d shift_c = sum over rows of cos(z)[:, c],
with z = x * scale + shift.
"""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def affine(x, scale, shift):
    def grad(upstream):
        d_scale = tf.reduce_sum(upstream * x)  # BUG: a scalar, should be reduce_sum(..., axis=0)
        d_shift = tf.reduce_sum(upstream, axis=0)
        return upstream * scale, d_scale, d_shift

    return x * scale + shift, grad


def model(x, scale, shift):
    return tf.reduce_sum(tf.sin(affine(x, scale, shift)))


inputs = {
    "x": np.linspace(-1.0, 1.0, 12).reshape(4, 3),
    "scale": np.array([0.5, -1.5, 2.0]),
    "shift": np.array([0.1, 0.2, -0.3]),
}
