"""tf.clip_by_norm at zero: a NaN gradient where the function is the identity.

tensorflow/tensorflow#22048. Below the clip norm the function is x itself, so
the Jacobian is the identity; TensorFlow 1.10 returned NaN at x = 0. TF 2.21
returns the identity (fixed): right verdict today: pass.
"""

import tensorflow as tf

RIGHT = "pass"


def model(x):
    return tf.clip_by_norm(x, 1.0)


inputs = {"x": [0.0, 0.0, 0.0]}
