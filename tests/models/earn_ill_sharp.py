"""A smooth function with a huge curvature: softplus(k x) / k with k = 1e9, at
x = 0. Its derivative sigmoid(k x) goes from 0 to 1 within a few 1e-9, so at
every step the finite differences can take the one-sided slopes look like 0
and 1; the true derivative at 0 is sigmoid(0) = 1/2. Smooth: never a kink."""

import tensorflow as tf


def model(x):
    return tf.math.softplus(1e9 * x) / 1e9


inputs = {"x": [0.0]}
