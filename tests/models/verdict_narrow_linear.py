"""relu(x + 5e-7) at x = 0: smooth at the point (slope 1 on (-5e-7, inf)); the
kink at -5e-7 lies inside the default step (about 6e-6), so the central
difference is off, but at smaller steps both one-sided slopes are 1. Not a kink."""

import tensorflow as tf


def model(x):
    return tf.nn.relu(x + 5e-7)


inputs = {"x": [0.0, 2.0]}
