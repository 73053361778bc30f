"""``tf.dynamic_stitch`` of three pieces, slot 2 given twice.

Pieces ``sin(p)`` (slots 0, 2) and ``q`` (slots 2, 3) merge into 4 slots; the
later piece wins slot 2, so merged = [sin p_0, 0-free, q_0, q_1] with slot 1
from ``r``. f = sum(D * merged) = D0 sin p_0 + D1 r_0 + D2 q_0 + D3 q_1:
df/dp = [D0 cos p_0, 0] (p_1 is overwritten), df/dq = [D2, D3], df/dr = [D1].
TensorFlow's DynamicStitch gradient gathers the upstream gradient for every
data element, so p_1 gets D2 cos p_1 for a slot it does not hold.
"""

import numpy as np
import tensorflow as tf

D = np.array([2.0, -1.0, 0.5, 4.0])


def model(p, q, r):
    merged = tf.dynamic_stitch(
        [tf.constant([0, 2]), tf.constant([2, 3]), tf.constant([1])], [tf.sin(p), q, r]
    )
    return tf.reduce_sum(tf.constant(D) * merged)


inputs = {"p": np.array([0.3, -0.9]), "q": np.array([1.1, 0.6]), "r": np.array([-0.2])}
