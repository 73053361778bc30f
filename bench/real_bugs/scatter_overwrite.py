"""A scatter that overwrites: ``tf.tensor_scatter_nd_update`` with a repeated
index. Row 1 of the result is written twice, by ``u[0]`` and then by ``u[2]``
(on CPU the later update wins), so the result does not depend on ``u[0]``:

    f(u) = 2 u[2] + 3 u[1]        df/du = [0, 3, 2]

TensorFlow's gradient of the update gathers the upstream gradient at every
index, duplicates included, and gives ``u[0]`` the slope 2 of the entry it no
longer holds: a wrong gradient (the function is constant in ``u[0]``), not a
straight-through estimator.
"""

import tensorflow as tf


def model(u):
    base = tf.zeros([4], u.dtype)
    merged = tf.tensor_scatter_nd_update(base, [[1], [3], [1]], u)
    return tf.reduce_sum(merged * tf.constant([1.0, 2.0, 5.0, 3.0], u.dtype))


inputs = {"u": [0.4, -1.3, 0.9]}

# bench/real_bugs: An overwritten tensor_scatter_nd_update entry gets a nonzero gradient (TensorFlow's gradient gathers at duplicate indices).
RIGHT = "fail"
CULPRIT = "TensorScatterUpdate"
