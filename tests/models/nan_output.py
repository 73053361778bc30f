import tensorflow as tf


def model(x):
    return tf.math.log(x)


inputs = {"x": [1.0, -1.0]}
