"""A smooth clip, c * tanh(x / c), with a hand-written gradient that forgets
the chain rule's 1 / c from inside tanh: twice the derivative 1 - tanh(x / c)**2
everywhere (c = 2). gradcli fails it and names the lines that apply and define it."""

import tensorflow as tf

LIMIT = 2.0


@tf.custom_gradient
def smooth_clip(x):
    y = LIMIT * tf.tanh(x / LIMIT)

    def grad(upstream):
        return upstream * LIMIT * (1.0 - tf.tanh(x / LIMIT) ** 2)  # BUG: should be 1 - tanh^2

    return y, grad


def model(x):
    return smooth_clip(x)


inputs = {"x": [-3.0, -0.5, 0.25, 1.5]}
