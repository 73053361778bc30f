"""A one-unit network w1 * tanh(w2 * x) fitted to data by squared error.

loss = sum((w1 tanh(w2 x) - y)^2). Closed form, with r = w1 tanh(w2 x) - y:
d/dw1 = sum(2 r tanh(w2 x)),  d/dw2 = sum(2 r w1 x (1 - tanh(w2 x)^2)).
"""

import tensorflow as tf


def model(w1, w2, x, y):
    return tf.reduce_sum((w1 * tf.tanh(w2 * x) - y) ** 2)


inputs = {
    "w1": 1.5,
    "w2": -0.7,
    "x": [-2.0, -0.5, 0.3, 1.0, 2.5],
    "y": [-1.0, -0.4, 0.2, 0.8, 1.1],
}
wrt = ["w1", "w2"]
