"""Two kinks hit exactly, each a non-smooth op on the path:

* relu(w * t - 1) at w * t = 1 (t = 2, w = 0.5): one-sided slopes in w are
  0 (left) and t = 2 (right); TensorFlow's relu gradient at 0 is 0.
* |v - 0.25| at v = 0.25: slopes -1 and 1; TensorFlow's abs gradient at 0 is 0.

Both analytic values lie between the slopes: valid subgradients (a passing kink).
"""

import tensorflow as tf


def model(w, v, t):
    return {
        "hinge": tf.nn.relu(w * t - 1.0),
        "dist": tf.abs(v - 0.25),
    }


inputs = {"w": [0.5], "v": [0.25], "t": [2.0]}
wrt = ["w", "v"]
