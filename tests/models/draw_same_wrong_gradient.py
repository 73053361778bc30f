"""The twin of draw_when_differentiated.py: one draw however it is called, and
a hand-written gradient that is not the derivative of the draw (-log(u) + 1
where it is -log(u)). The values do not differ: nothing explains this
mismatch away."""

import tensorflow as tf

SEED = (1, 2)


@tf.custom_gradient
def exponential(scale):
    u = tf.random.stateless_uniform(tf.shape(scale), seed=SEED, dtype=scale.dtype)

    def grad(dy):
        return dy * (-tf.math.log(u) + 1.0)

    return -tf.math.log(u) * scale, grad


def model(scale):
    return exponential(scale)


inputs = {"scale": [0.5, 1.0, 2.0]}
