"""softplus(k x) / k with k = 1e9 at x = 0 (huge curvature, smooth), with a
custom gradient that adds 0.2: it gives 0.7 where the derivative is
sigmoid(0) = 1/2. The one-sided slopes that finite differences can see look
like 0 and 1; 0.7 lies between them, but no op on the path is non-smooth, so it
is no kink's subgradient and must never pass."""

import tensorflow as tf


@tf.custom_gradient
def smooth_relu(x):
    def grad(upstream):
        return upstream * (tf.sigmoid(1e9 * x) + 0.2)  # BUG: + 0.2

    return tf.math.softplus(1e9 * x) / 1e9, grad


def model(x):
    return smooth_relu(x)


inputs = {"x": [0.0]}
