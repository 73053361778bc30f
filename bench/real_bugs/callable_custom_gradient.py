"""A callable object whose __call__ is a tf.custom_gradient (a hand-written op
class), its gradient missing a factor 2 for the second input.

Called by keyword, the custom gradient is skipped (see
custom_gradient_as_model.py). Right verdict: fail.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "Bilinear.__call__"


class Bilinear:
    @tf.custom_gradient
    def __call__(self, a, b):
        def grad(dy):
            return dy * b * b, dy * a * b  # d(a b^2)/db = 2 a b
        return a * b * b, grad


model = Bilinear()
inputs = {"a": [0.5, -1.0], "b": [1.5, 2.0]}
