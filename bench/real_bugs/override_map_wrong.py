"""A ``gradient_override_map`` that installs a wrong registered gradient.

Inside a ``tf.function`` the gradient of ``Sigmoid`` is replaced by
``sloppy_sigmoid_grad`` (registered as "BlameSloppySigmoid"), which returns
grad * y instead of grad * y * (1 - y). Truth for f(x, w) = sum(sigmoid(w x)^2):
df/dx = 2 s^2 (1 - s) w, df/dw = sum 2 s^2 (1 - s) x, with s = sigmoid(w x).
"""

import numpy as np
import tensorflow as tf


def sloppy_sigmoid_grad(op, grad):
    y = op.outputs[0]
    return grad * y  # BUG: the derivative of sigmoid is y * (1 - y)


try:
    tf.RegisterGradient("BlameSloppySigmoid")(sloppy_sigmoid_grad)
except KeyError:  # registered already (the file was loaded before in this process)
    pass


@tf.function
def forward(x, w):
    z = w * x
    with tf.compat.v1.get_default_graph().gradient_override_map({"Sigmoid": "BlameSloppySigmoid"}):
        s = tf.sigmoid(z)
    return tf.reduce_sum(tf.square(s))


def model(x, w):
    return forward(x, w)


inputs = {"x": np.array([0.4, -1.1, 0.7]), "w": np.array(1.3)}

# bench/real_bugs: A gradient_override_map installing a wrong registered gradient.
RIGHT = "fail"
CULPRIT = "BlameSloppySigmoid"
