"""reduce_max on a tie: x[1] = x[2] = 3. The one-sided slopes along x[1] (and
x[2]) are 0 (left) and 1 (right); TensorFlow splits the gradient, 0.5 each, which
is also what the central difference gives: a kink that must be reported."""

import tensorflow as tf


def model(x):
    return tf.reduce_max(x)


inputs = {"x": [1.0, 3.0, 3.0]}
