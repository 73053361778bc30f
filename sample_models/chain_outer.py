"""The outer half f of a composition f(g(x)), for chaining `gradcli vjp` calls.

y = f(h) = [h0 + h1 * h2, exp(h0) * h2]; the default h is g([0.5, -1.5]) from
chain_inner.py (override it with --set h=@FILE.npz:output).
Closed form: dy/dh = [[1, h2, h1], [exp(h0) h2, 0, exp(h0)]].
"""

import math

import tensorflow as tf


def model(h):
    return tf.stack([h[0] + h[1] * h[2], tf.exp(h[0]) * h[2]])


inputs = {"h": [0.5 * -1.5, math.sin(0.5), (-1.5) ** 2]}
