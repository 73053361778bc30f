"""A float64 model whose custom gradient, inside ``tf.recompute_grad``, is
3e-4 too large relative to the truth: float64 rules must see it.

f(x) = sum(2 sin(x)); the custom gradient of ``wave`` returns
cos(x) (1 + 3e-4) instead of cos(x), so df/dx is reported as
2 cos(x) (1 + 3e-4) against the truth 2 cos(x).
"""

import tensorflow as tf

ERROR = 3e-4


@tf.custom_gradient
def wave(x):
    def grad(upstream):
        return upstream * tf.cos(x) * (1.0 + ERROR)

    return tf.sin(x), grad


def block(x):
    return 2.0 * wave(x)


recomputed = tf.recompute_grad(block)


def model(x):
    return tf.reduce_sum(recomputed(x))


inputs = {"x": [0.3, -1.2, 2.0, 0.7]}
