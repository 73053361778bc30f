"""A smooth, ill-conditioned function: cos(1e7 x), whose derivative
-1e7 sin(1e7 x) changes sign every 3e-7 in x. The default central-difference
step (about 6e-6) spans many periods, so the central difference is noise; only
much smaller steps see the slope. Smooth everywhere: never a kink."""

import tensorflow as tf


def model(x):
    return tf.cos(1e7 * x)


inputs = {"x": [0.3, 0.7]}

# bench/real_bugs: A smooth fast oscillation: noisy differences are never a kink.
RIGHT = "pass"
