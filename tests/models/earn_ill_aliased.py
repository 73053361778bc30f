"""cos(1e8 x): a period of 6.3e-8, shorter than the largest steps of the
one-sided ladder by a factor of 100. Difference quotients at steps near
multiples of the period agree with each other (aliasing) on a slope that is
wrong; the smaller steps expose it. Smooth: never a kink, and finite
differences cannot confirm the derivative here (inconclusive), nor refute it."""

import tensorflow as tf


def model(x):
    return tf.cos(1e8 * x)


inputs = {"x": [0.3]}
