"""``tf.dynamic_stitch`` with a duplicate index: slot 1 is given by ``a[1]``
and again by ``b[0]``; the later data wins, so the merged vector is
``[a[0], b[0], b[1]]`` and

    f(a, b) = a[0] - 2 b[0] + 4 b[1]      df/da = [1, 0]   df/db = [-2, 4]

TensorFlow's gradient gathers the upstream gradient for every data element,
so ``a[1]`` gets -2 for a slot it does not hold: a wrong gradient where the
function is locally constant.
"""

import tensorflow as tf


def model(a, b):
    merged = tf.dynamic_stitch([tf.constant([0, 1]), tf.constant([1, 2])], [a, b])
    return tf.reduce_sum(merged * tf.constant([1.0, -2.0, 4.0], a.dtype))


inputs = {"a": [0.7, 1.9], "b": [-0.6, 0.25]}

# bench/real_bugs: tf.dynamic_stitch with a duplicate index: the overwritten value gets a gradient.
RIGHT = "fail"
CULPRIT = "DynamicStitch"
