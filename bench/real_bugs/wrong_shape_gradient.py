"""A per-channel scale whose custom gradient returns a scalar (summed over the
channels), beside a correct input.

Backpropagation broadcasts the scalar to every channel: each channel gets the
total. Right verdict: fail for `scale` (the shapes named); `x` still checked.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "channel_scale"


@tf.custom_gradient
def channel_scale(x, scale):
    def grad(dy):
        return dy * scale, tf.reduce_sum(dy * x)  # should keep the channel axis
    return x * scale, grad


def model(x, scale):
    return channel_scale(x, scale)


inputs = {"x": [[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]], "scale": [1.0, 2.0, 3.0]}
