"""A float64 model wrapped in tf.recompute_grad, with a custom gradient inside
off by a relative 3e-4.

tf.recompute_grad's gradient plumbing has float32 constants beside the float64
values; a checker that takes the lowest dtype anywhere in the graph checks at
float32 tolerances (rtol 1e-3) and passes the bug. Right verdict: fail.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "softplus"


@tf.custom_gradient
def softplus(x):
    def grad(dy):
        return dy * tf.sigmoid(x) * (1.0 + 3e-4)
    return tf.math.softplus(x), grad


@tf.recompute_grad
def block(x, w):
    return softplus(tf.linalg.matvec(w, x))


def model(x, w):
    return block(x, w)


inputs = {"x": [0.2, -0.4, 0.9], "w": [[0.5, -0.3, 0.8], [0.1, 0.7, -0.6]]}
