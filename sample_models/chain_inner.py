"""The inner half g of a composition f(g(x)), for chaining `gradcli vjp` calls.

h = g(x) = [x0 * x1, sin(x0), x1^2] at x = [0.5, -1.5].
Closed form: dh/dx = [[x1, x0], [cos(x0), 0], [0, 2 x1]].
"""

import tensorflow as tf


def model(x):
    return tf.stack([x[0] * x[1], tf.sin(x[0]), x[1] ** 2])


inputs = {"x": [0.5, -1.5]}
