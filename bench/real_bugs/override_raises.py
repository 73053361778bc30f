"""A ``tf.RegisterGradient`` override that raises: inside a ``tf.function``,
``gradient_override_map`` replaces the gradient of ``Tanh`` by
``blame_raising_tanh``, which raises. The forward pass is fine.
"""

import numpy as np
import tensorflow as tf


def raising_tanh_grad(op, grad):
    raise NotImplementedError("this tanh gradient is not written yet")


try:
    tf.RegisterGradient("BlameRaisingTanh")(raising_tanh_grad)
except KeyError:  # registered already (the file was loaded before in this process)
    pass


@tf.function
def squash(x):
    scaled = 3.0 * x + 1.0
    with tf.compat.v1.get_default_graph().gradient_override_map({"Tanh": "BlameRaisingTanh"}):
        bent = tf.tanh(scaled)
    return tf.reduce_sum(bent * scaled)


def model(x):
    return squash(x)


inputs = {"x": np.array([0.2, -0.5, 0.8])}

# bench/real_bugs: A registered gradient that raises.
RIGHT = "fail"
CULPRIT = "Tanh"
