"""y = tanh(W x) with W of shape (60, 100): 6,000 differentiated elements, so
``auto`` runs fast mode. The custom gradient scales one element's gradient,
dy[17]/dW[17, 42], by 1 + error: with error = 1e-3 a single Jacobian element is
wrong by 0.1%; ``--set error=0`` makes the gradient correct."""

import numpy as np
import tensorflow as tf

WRONG = (17, 42)


def model(W, x, error):
    one_hot = np.zeros((60, 100))
    one_hot[WRONG] = 1.0

    @tf.custom_gradient
    def layer(w):
        y = tf.tanh(tf.linalg.matvec(w, x))

        def grad(dy):
            dw = (dy * (1.0 - y * y))[:, None] * x[None, :]
            return dw * (1.0 + error * tf.constant(one_hot, dw.dtype))

        return y, grad

    return layer(W)


def inputs(rng):
    return {
        "W": rng.uniform(0.5, 1.5, (60, 100)) * rng.choice([-1.0, 1.0], (60, 100)) / 30.0,
        "x": rng.uniform(0.5, 1.5, 100),
        "error": 1e-3,
    }


wrt = ["W"]
