"""A correct float64 model whose block is wrapped in ``tf.recompute_grad``.

The reverse pass of ``tf.recompute_grad`` adds float32 plumbing beside the
values (a float32 0-or-NaN built from a bool of the cotangent, cast and added
to the recomputed arguments); every tensor that carries x or a cotangent is
float64, so the check runs with float64 rules.
f(x) = sum((sin(x) e^(x/2))**2); df/dx = 2 g(x) g'(x), g = sin(x) e^(x/2),
g' = (cos(x) + sin(x) / 2) e^(x/2).
"""

import tensorflow as tf


def block(x):
    return tf.sin(x) * tf.exp(0.5 * x)


recomputed = tf.recompute_grad(block)


def model(x):
    return tf.reduce_sum(recomputed(x) ** 2)


inputs = {"x": [0.3, -1.2, 2.0, 0.7]}
