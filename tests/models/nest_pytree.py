"""A pytree model (jax's convention): `params` a dict of arrays, a custom
gradient that returns the parameters' gradient as a dict. Right.

y = w * x + b elementwise; the leaves are params.w, params.b and x."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def affine(params, x):
    w, b = params["w"], params["b"]

    def grad(dy):
        return {"w": dy * x, "b": dy}, dy * w

    return w * x + b, grad


def model(params, x):
    y = affine(params, x)
    return {"loss": 0.5 * tf.reduce_sum(y * y), "parts": {"y": y}}


inputs = {
    "params": {"w": np.array([0.5, -1.0, 2.0]), "b": np.array([0.1, 0.2, -0.3])},
    "x": np.array([1.0, 2.0, -1.5]),
}
