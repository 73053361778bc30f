"""``tf.tensor_scatter_nd_update`` into a 2 x 2 grid, one cell written twice.

The updates are ``w * t`` (an op before the scatter). Cell (0, 1) is written
by update 0 and then by update 2 (the later write wins on CPU), so the grid is
[[0, 2 w t_2], ...] and update 0 is lost. With weights C:

    f(w, t) = sum(C * grid) = C01 w t_2 + C10 w t_1 + C11 w t_3

so df/dt_0 = 0 exactly. TensorFlow's TensorScatterUpdate gradient gathers the
upstream gradient at every index, duplicates included, and gives t_0 the
slope C01 w of the cell it no longer holds.
"""

import numpy as np
import tensorflow as tf

C = np.array([[1.5, -2.0], [0.5, 3.0]])


def model(w, t):
    updates = w * t
    grid = tf.tensor_scatter_nd_update(
        tf.zeros([2, 2], tf.float64), [[0, 1], [1, 0], [0, 1], [1, 1]], updates
    )
    return tf.reduce_sum(tf.constant(C) * grid)


inputs = {"w": np.array(1.3), "t": np.array([0.4, -0.7, 1.2, 0.9])}
