"""A custom gradient whose first derivative is right and whose second is not.

The gradient function of tanh returns dy * (1 - y^2) with y held constant
(tf.stop_gradient), so the Hessian (what Newton-type optimisers and
gradient-penalty losses differentiate) misses the y-dependence. Right verdict
(checking second derivatives, `check = {"order": 2}`): fail.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "tanh"
check = {"order": 2}


@tf.custom_gradient
def tanh(x):
    y = tf.tanh(x)

    def grad(dy):
        return dy * (1.0 - tf.stop_gradient(y) ** 2)
    return y, grad


def model(x):
    return tf.reduce_sum(tanh(x) * tf.constant([1.0, -2.0, 0.5], x.dtype))


inputs = {"x": [0.3, -0.8, 1.2]}
