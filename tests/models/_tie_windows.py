"""Shared by ``earn_tie_every_max.py`` and ``earn_tie_first_max.py``: the
model (a max over windows of 4 with its gradient written by hand) and its
input, windows with a tie of two at each maximum."""

import numpy as np
import tensorflow as tf


def windowed_max(x, first_only):
    """(max of each window of 4 of x, its gradient function): the gradient goes
    to the first maximum of each window, or to every maximum."""
    windows = tf.reshape(x, [-1, 4])
    top = tf.reduce_max(windows, axis=1)

    def grad(dy):
        hits = tf.cast(tf.equal(windows, top[:, None]), x.dtype)
        if first_only:  # keep the first hit of each row
            hits = hits * tf.cast(tf.equal(tf.cumsum(hits, axis=1), 1.0), x.dtype)
        return tf.reshape(hits * dy[:, None], tf.shape(x))

    return top, grad


def tie_windows(rng):
    """16 windows (v, v, a, b), 0 < v, a and b below v."""
    v = 1.0 + rng.random(16)
    below = v[:, None] - 0.5 - rng.random((16, 2))
    return {"x": np.concatenate([v[:, None], v[:, None], below], axis=1).reshape(-1)}


def tie_max_model(first_only):
    """The model: y = the max of each window of 4 of x, through a
    ``tf.custom_gradient`` whose gradient is ``windowed_max``'s."""

    @tf.custom_gradient
    def window_max(x):
        return windowed_max(x, first_only=first_only)

    def model(x):
        return {"y": window_max(x)}

    return model
