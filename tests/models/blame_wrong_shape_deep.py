"""A custom gradient returns a broadcastable shape, and it travels on.

``gain`` scales 2 rows of 3 channels by ``g = exp(log_g)``, per channel. Its
gradient for ``g`` keeps a leading axis (shape ``(1, 3)`` instead of ``(3,)``);
the Exp gradient downstream multiplies it by ``exp(log_g)`` and broadcasts, so
the gradient that reaches ``log_g`` has shape ``(1, 3)`` too, with the right
values. Truth: f = sum(tanh(x * g)), df/dlog_g_c = g_c sum_rows x_rc (1 -
tanh(x_rc g_c)^2), df/dx = g (1 - tanh(x g)^2).
"""

import numpy as np
import tensorflow as tf


@tf.custom_gradient
def gain(x, g):
    def grad(upstream):
        return upstream * g, tf.reduce_sum(upstream * x, axis=0, keepdims=True)  # BUG: keepdims

    return x * g, grad


def model(x, log_g):
    return tf.reduce_sum(tf.tanh(gain(x, tf.exp(log_g))))


inputs = {
    "x": np.array([[0.3, -0.8, 1.1], [0.5, 0.2, -0.4]]),
    "log_g": np.array([0.1, -0.2, 0.3]),
}
