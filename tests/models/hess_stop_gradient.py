"""A custom-gradient softplus whose first derivative is right but whose
gradient function hides its input from TensorFlow with tf.stop_gradient.

softplus'(x) = sigmoid(x) is returned exactly, so first-order checks pass. The
second derivative of sum(softplus(x)^2) is 2 sigmoid(x)^2 + 2 softplus(x)
sigmoid(x)(1 - sigmoid(x)); autodiff of the gradient sees only the first term
(sigmoid(stop_gradient(x)) has derivative 0), so second-order checks fail.
"""

import tensorflow as tf


@tf.custom_gradient
def softplus(x):
    y = tf.math.log1p(tf.exp(x))

    def grad(upstream):
        return upstream * tf.sigmoid(tf.stop_gradient(x))

    return y, grad


def model(x):
    return tf.reduce_sum(softplus(x) ** 2)


inputs = {"x": [-1.5, 0.25, 2.0]}
