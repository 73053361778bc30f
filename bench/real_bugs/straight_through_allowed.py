"""A straight-through estimator written as ``w + tf.stop_gradient(q(w) - w)``
around a rounding quantizer q(w) = round(4 w) / 4 (steps of 0.25).

The function is q(w) . c with c = [1, -2, 3]: piecewise constant in w, true
derivative 0 at every point off a step; the gradient is the straight-through
surrogate c. A surrogate by construction: fails, passes with --allow-surrogate.
"""

import tensorflow as tf


def quantize(w):
    return tf.round(w * 4.0) / 4.0


def model(w):
    w_q = w + tf.stop_gradient(quantize(w) - w)
    return tf.reduce_sum(w_q * tf.constant([1.0, -2.0, 3.0], w.dtype))


inputs = {"w": [0.3, -0.61, 1.05]}

# bench/real_bugs: A deliberate straight-through estimator (x + stop_gradient(round(x) - x)), checked with allow_surrogate.
RIGHT = "pass"
check = {"allow_surrogate": True}
