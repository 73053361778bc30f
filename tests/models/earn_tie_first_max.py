"""The twin of ``earn_tie_every_max.py``: the same windows of 4 with a tie of
two at each maximum, and a gradient that gives the first maximum of each window
the whole upstream gradient (TensorFlow's max-pool rule): the gradient of one
active piece, a subgradient. Moving both tied elements by t moves the max by t,
and this gradient says t."""

import tensorflow as tf

from _tie_windows import tie_windows, windowed_max

FIRST_ONLY = True


@tf.custom_gradient
def window_max(x):
    return windowed_max(x, first_only=FIRST_ONLY)


def model(x):
    return {"y": window_max(x)}


inputs = tie_windows
