"""cos(1e7 x) with a custom gradient 10% too small: -0.9e7 sin(1e7 x).
Ill-conditioned and smooth, so the wrong gradient must fail as a mismatch
(never pass as a kink's "subgradient")."""

import tensorflow as tf


@tf.custom_gradient
def wave(x):
    def grad(upstream):
        return upstream * (-0.9e7) * tf.sin(1e7 * x)  # BUG: the factor is 1e7

    return tf.cos(1e7 * x), grad


def model(x):
    return wave(x)


inputs = {"x": [0.3, 0.7]}
