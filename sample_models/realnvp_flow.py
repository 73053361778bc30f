"""A small RealNVP-style normalizing flow on R^4 with its log-det-Jacobian.

Two affine coupling layers; each keeps half of the coordinates (x_a) and maps
the other half by x_b * exp(s(x_a)) + t(x_a), with s = tanh(x_a A + a) and
t = x_a B + b; the halves swap between layers. The Jacobian of a coupling is
triangular, so log|det J| = sum(s) per layer, summed over the layers: that is
`log_det_jacobian`, which `gradcli logdet` compares with slogdet of the
autodiff Jacobian per example.
"""

import numpy as np
import tensorflow as tf

_rng = np.random.default_rng(3)
PARAMS = [
    {k: 0.5 * _rng.standard_normal(s) for k, s in
     (("A", (2, 2)), ("a", (2,)), ("B", (2, 2)), ("b", (2,)))}
    for _ in range(2)
]


def _coupling(x, p):
    xa, xb = x[:, :2], x[:, 2:]
    s = tf.tanh(xa @ tf.constant(p["A"], x.dtype) + tf.constant(p["a"], x.dtype))
    t = xa @ tf.constant(p["B"], x.dtype) + tf.constant(p["b"], x.dtype)
    y = tf.concat([xa, xb * tf.exp(s) + t], axis=1)
    return y, tf.reduce_sum(s, axis=1)


def _swap(x):
    return tf.concat([x[:, 2:], x[:, :2]], axis=1)


def _flow(x):
    y, ld1 = _coupling(x, PARAMS[0])
    y, ld2 = _coupling(_swap(y), PARAMS[1])
    return y, ld1 + ld2


def model(x):
    return _flow(x)[0]


def log_det_jacobian(x):
    return _flow(x)[1]


def inputs(rng):
    return {"x": rng.standard_normal((5, 4))}
