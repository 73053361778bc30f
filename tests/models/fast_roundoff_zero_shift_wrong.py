"""fast_roundoff_zero_shift.py with a wrong gradient for the shift b, wrong by
less than the default step's round-off: a tf.custom_gradient adds 1e-12 of
|dy|'s row sums (about 2e-8) to b's gradient, which should be the row sums of
dy (0 after the softmax). At the default step the finite differences cannot
tell (inconclusive); at the round-off retry's larger steps they can, and a
mismatch there is not trusted: the pair must stay a failure, never pass."""

import numpy as np
import tensorflow as tf

W = tf.constant(np.random.default_rng(1).standard_normal((6, 16)))


@tf.custom_gradient
def shifted(x, b):
    def grad(dy):
        return dy, tf.reduce_sum(dy, axis=-1) + 1e-12 * tf.reduce_sum(tf.abs(dy), axis=-1)  # BUG: the |dy| leak

    return x + b[:, None], grad


def model(x, b):
    return 3e4 * tf.reduce_sum(tf.nn.softmax(shifted(x, b), axis=-1) * W)


inputs = {"x": np.random.default_rng(2).standard_normal((6, 16)), "b": np.random.default_rng(3).standard_normal(6)}
