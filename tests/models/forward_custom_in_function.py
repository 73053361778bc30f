"""A tf.function model calling a custom gradient whose forward ops have the
wrong derivative (x * stop_gradient(x): d/dx is x, not 2x) while its rule
(2x dy) is right. TensorFlow's forward mode through the traced function uses
the rule; run eagerly it differentiates the forward ops and gives x: forward
mode is wrong there, and both ways are checked."""

import tensorflow as tf


@tf.custom_gradient
def square(x):
    def grad(dy):
        return dy * 2 * x

    return x * tf.stop_gradient(x), grad


@tf.function
def model(x):
    return square(x)


inputs = {"x": [1.0, -2.0, 0.5]}
