"""x^2 through a custom gradient whose forward ops hide half the dependence:
reverse mode (the custom gradient, 2x) is right; TensorFlow's forward mode
differentiates the forward ops x * stop_gradient(x) and gives x."""
import tensorflow as tf


@tf.custom_gradient
def square(x):
    return x * tf.stop_gradient(x), lambda dy: dy * 2.0 * x


def model(x):
    return square(x)


inputs = {"x": [0.5, -1.5, 2.0]}
