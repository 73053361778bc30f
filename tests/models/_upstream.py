"""Twin fixtures of the cotangent rule: a square whose custom gradient treats
its upstream gradient dy right (``dy * 2x``), ignores it (``2x``) or takes
its magnitude only (``|dy| * 2x``); the model sums it (a scalar output, so
the check's unit cotangents feed dy = 1 everywhere)."""

import tensorflow as tf

RULES = {
    "right": lambda dy, x: dy * 2 * x,
    "ignores": lambda dy, x: 2 * x,
    "magnitude": lambda dy, x: tf.abs(dy) * 2 * x,
}
X = [1.0, -2.0, 0.5]


def summed_square(rule):
    @tf.custom_gradient
    def square(x):
        def grad(dy):
            return RULES[rule](dy, x)

        return x * x, grad

    def model(x):
        return tf.reduce_sum(square(x))

    return model, {"x": X}
