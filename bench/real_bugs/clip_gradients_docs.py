"""The gradient-clipping tf.custom_gradient of TensorFlow's "Advanced automatic
differentiation" guide: the identity forward, clip_by_norm(dy, 0.5) backward.

By design its gradient is not the derivative once the upstream gradient's norm
exceeds 0.5 (here it is about 4): a check must say mismatch and name
``clip_gradients``. Right verdict: fail.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "clip_gradients"


@tf.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return tf.clip_by_norm(dy, 0.5)

    return y, backward


def model(x):
    return tf.reduce_sum(clip_gradients(x) ** 2)


inputs = {"x": [1.0, -1.5, 0.8]}
