"""relu(x - 5e-7) at x = 0: flat at the point (slope 0 on (-inf, 5e-7)); the
kink at 5e-7 lies inside the default step (about 6e-6), so the central
difference is about 0.46 while the analytic slope is 0, but at smaller steps the
function is constant on both sides, which agrees with 0. Not a kink, not a
mismatch (a relu input just below zero, within the step: common in real
networks), and not a surrogate (the analytic value is 0)."""

import tensorflow as tf


def model(x):
    return tf.nn.relu(x - 5e-7)


inputs = {"x": [0.0, 2.0]}
