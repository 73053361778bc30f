"""An output far larger than its change along any direction: 3000 plus the sum
of sigmoid(1e-6 w) over 5,000 weights. Along a random probe the derivative is
about 2e-5 while |f| is about 5,500, so at the default step the round-off of
the difference quotient (8 eps |f| / h) is over a tenth of it: inconclusive.
At 16 times the step it is resolved; the function is nearly linear there, so
the truncation the larger step adds is far below the tolerance. The gradient
is right (its closed form: 1e-6 sigmoid'(1e-6 w))."""

import numpy as np
import tensorflow as tf


def model(w):
    return tf.reduce_sum(tf.sigmoid(1e-6 * w)) + 3000.0


inputs = {"w": np.random.default_rng(0).standard_normal(5000)}
