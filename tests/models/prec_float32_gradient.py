"""A correct custom gradient whose gradient function computes in float32.

f(x) = sum(2 x**2) runs in float64; ``grad`` returns 4 x computed as
(x + 1)**2 - (x - 1)**2 in float32, which loses about eps32 * x**2 / (4 x) of
relative accuracy (about 1e-5 at x = 300): the analytic side is float32-accurate
only, so the check must use float32 tolerances and say the gradient is where
the precision drops.
"""

import tensorflow as tf


@tf.custom_gradient
def double_square(x):
    def grad(upstream):
        low = tf.cast(x, tf.float32)
        slope = (low + 1.0) ** 2 - (low - 1.0) ** 2
        return upstream * tf.cast(slope, tf.float64)

    return 2.0 * x**2, grad


def model(x):
    return tf.reduce_sum(double_square(x))


inputs = {"x": [300.3, -512.7, 123.9]}
