"""A ReLU layer evaluated with pre-activations exactly at 0.

y = relu(W x) with W x = [0, 1.5, 0, -2]: elements 0 and 2 sit on the kink.
dy_i/dW_ij = x_j where (W x)_i > 0, else 0; at (W x)_i = 0 the slope from the
left is 0 and from the right x_j, and TensorFlow's value 0 is a valid
subgradient: the check passes and reports the kinks.
"""

import tensorflow as tf


def model(W, x):
    return tf.nn.relu(tf.linalg.matvec(W, x))


inputs = {
    "W": [[1.0, -1.0], [0.5, 1.0], [2.0, -2.0], [-1.0, -1.0]],
    "x": [1.0, 1.0],
}
wrt = ["W"]
