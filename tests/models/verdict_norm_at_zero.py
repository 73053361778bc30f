"""tf.norm at x = 0: along every axis the function is |x_i|, one-sided slopes
-1 (left) and 1 (right); TensorFlow's gradient is x / |x| = 0 / 0 = NaN (the
SqrtGrad of sqrt(0) is Inf). A genuine singularity, never a pass."""

import tensorflow as tf


def model(x):
    return tf.norm(x)


inputs = {"x": [0.0, 0.0, 0.0]}
