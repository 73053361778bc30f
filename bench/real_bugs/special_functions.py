"""Correct special functions: lgamma, digamma (tensorflow/tensorflow#1750 asked
for its gradient, polygamma(1)), bessel_i0e, bessel_i1e, erfinv. Right verdict: pass."""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return {
        "lgamma": tf.math.lgamma(x),
        "digamma": tf.math.digamma(x),
        "i0e": tf.math.bessel_i0e(x),
        "i1e": tf.math.bessel_i1e(x),
        "erfinv": tf.math.erfinv(x / 4.0),
    }


inputs = {"x": [0.6, 1.7, 3.1]}
