"""y = tanh(W x) with W of shape (60, 100): 6,000 differentiated elements, so
``auto`` runs fast mode. The custom gradient scales one element's gradient,
dy/dW[17, 42], by 1 + 1e-3: a single Jacobian element wrong by 0.1%."""

import numpy as np
import tensorflow as tf

WRONG = (17, 42)
RELATIVE_ERROR = 1e-3


@tf.custom_gradient
def layer(w, x):
    y = tf.tanh(tf.linalg.matvec(w, x))

    def grad(dy):
        dz = dy * (1.0 - y * y)
        dw = dz[:, None] * x[None, :]
        scale = np.ones(w.shape)
        scale[WRONG] += RELATIVE_ERROR
        return dw * tf.constant(scale, dw.dtype), tf.linalg.matvec(w, dz, transpose_a=True)

    return y, grad


def model(W, x):
    return layer(W, x)


def inputs(rng):
    return {
        "W": rng.uniform(0.5, 1.5, (60, 100)) * rng.choice([-1.0, 1.0], (60, 100)) / 30.0,
        "x": rng.uniform(0.5, 1.5, 100),
    }


wrt = ["W"]
