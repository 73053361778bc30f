"""A square whose custom gradient multiplies by (1 + 1e-3 n), n a fresh
standard normal draw each time it runs: the same reverse pass twice gives
two results. The finding is a nondeterministic gradient, naming this
function, not "another function than the user's"."""

import tensorflow as tf


@tf.custom_gradient
def noisy_square(x):
    def grad(dy):
        return dy * 2 * x * (1 + 1e-3 * tf.random.normal(tf.shape(x), dtype=x.dtype))

    return x * x, grad


def model(x):
    return noisy_square(x)


inputs = {"x": [1.0, -2.0, 0.5]}
