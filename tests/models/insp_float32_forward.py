"""A float32 function with more outputs than inputs (auto's Jacobian takes
forward mode), and no gradient of its own: y = A tanh(x), 6 outputs of 3 inputs."""
import numpy as np
import tensorflow as tf

A = np.array([[1.0, 0.5, -0.3], [0.2, -1.1, 0.7], [0.9, 0.4, 0.1],
              [-0.6, 0.3, 1.2], [0.5, -0.2, -0.8], [1.3, 0.6, 0.2]], np.float32)


def model(x):
    return tf.linalg.matvec(tf.constant(A), tf.tanh(x))


inputs = {"x": np.array([0.3, -1.2, 0.8], np.float32)}
