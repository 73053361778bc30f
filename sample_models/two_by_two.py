"""Two inputs, two outputs: u = a * b and v = sin(a) + b^2 (elementwise).

Closed form: du/da = diag(b), du/db = diag(a), dv/da = diag(cos a), dv/db = diag(2 b).
"""

import tensorflow as tf


def model(a, b):
    return {"u": a * b, "v": tf.sin(a) + b**2}


inputs = {"a": [0.5, -1.0, 2.0], "b": [1.5, 0.25, -0.75]}
