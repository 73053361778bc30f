"""A complex input z = x + iy with a custom gradient under TensorFlow's
convention (the gradient of a real loss f is df/dx + i df/dy). Wrong: it
returns the conjugate, 2x - 2iy.

y = |z|**2 = x**2 + y**2 elementwise: the gradient is 2x + 2iy = 2z."""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def abs2(z):
    def grad(dy):
        return tf.cast(dy, z.dtype) * 2.0 * tf.math.conj(z)  # wrong: TensorFlow's gradient is 2z

    return tf.math.real(z * tf.math.conj(z)), grad


def model(z):
    return abs2(z)


inputs = {"z": np.array([1.0 + 2.0j, -0.5 + 1.0j, 3.0 - 1.0j])}
