"""A smooth function with large curvature at the point: exp(8 x) / (1 + x^2),
fast oscillation cos(40 x) on top.

Central differences are noisy at the default step; a checker must not call
that a kink (there is no non-smooth op) nor fail a correct gradient. Right
verdict: pass.
"""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return tf.exp(8.0 * x) / (1.0 + x * x) + tf.cos(40.0 * x)


inputs = {"x": [0.9, 1.4, -0.3]}
