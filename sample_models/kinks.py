"""Three non-differentiable points, each hit exactly.

* |a| at a = [0, 2]: slopes -1 and 1 at a_0 = 0; TensorFlow gives 0.
* max(b, c) at b = c: d/db has slopes 0 (left) and 1 (right); TensorFlow gives 1.
* a hinge loss max(0, 1 - m) at margin m = w * t = 1: slopes -t and 0 in w.

Closed form away from the kinks: d|a|/da = sign(a), dmax/db = [b > c],
d hinge/dw = -t [w t < 1]. Every TensorFlow value lies between the one-sided
slopes, so the check passes and reports the kinks.
"""

import tensorflow as tf


def model(a, b, c, w, t):
    return {
        "abs": tf.abs(a),
        "max": tf.maximum(b, c),
        "hinge": tf.nn.relu(1.0 - w * t),
    }


inputs = {"a": [0.0, 2.0], "b": [0.5], "c": [0.5], "w": [0.5], "t": [2.0]}
wrt = ["a", "b", "w"]
