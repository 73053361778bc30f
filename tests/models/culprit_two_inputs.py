"""Two inputs whose paths meet before one wrong custom gradient: y =
sum(sq(tanh(a * b) + sin(a) * cos(b))), where sq's gradient is 3 h for the
true 2 h. Both pairs fail and both culprit searches walk the same right ops
(mul, tanh, sin, cos, add) to sq (tests/test_diagnose.py)."""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def sq(h):
    def grad(dy):
        return dy * 3.0 * h

    return h * h, grad


def model(a, b):
    h = tf.tanh(a * b) + tf.sin(a) * tf.cos(b)
    return tf.reduce_sum(sq(h))


inputs = {"a": np.linspace(0.3, 1.2, 6), "b": np.linspace(-0.8, 0.9, 6)}
