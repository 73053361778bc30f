"""A tf.Module subclass whose __init__ skips super().__init__(): TensorFlow
still tracks its variable (trainable_variables works, training works), but
its ``name`` raises AttributeError. gradcli names the weight by the file's
name for the module: net/w. y = sum(w * x), so dy/dw = x and dy/dx = w.
"""

import tensorflow as tf


class Net(tf.Module):
    def __init__(self):  # no super().__init__()
        self.w = tf.Variable([1.0, -2.0], dtype=tf.float64)

    def __call__(self, x):
        return tf.reduce_sum(self.w * x)


net = Net()


def model(x):
    return net(x)


inputs = {"x": [0.5, 1.5]}
