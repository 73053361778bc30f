"""A float16 model (float16 inputs, a float16 constant: it cannot run in
float64, so it is checked in float16) whose custom gradient of sin is twice
the derivative. f = sum(sin(x * s)): d f / d x[i] = s[i] cos(x[i] s[i]); the
gradient gives 2 s[i] cos(x[i] s[i]). Its one-sided slopes do not settle to a
tenth in float16, yet they refute a gradient 2x off: a mismatch."""

import numpy as np
import tensorflow as tf

S = np.array([1.5, -0.5, 2.0], dtype=np.float16)


@tf.custom_gradient
def wave(x):
    def grad(upstream):
        return upstream * 2.0 * tf.cos(x)  # BUG: the derivative of sin is cos

    return tf.sin(x), grad


scale = tf.constant(S)


def model(x):
    return tf.reduce_sum(wave(x * scale))


inputs = {"x": np.array([0.3, -1.2, 0.7], dtype=np.float16)}
