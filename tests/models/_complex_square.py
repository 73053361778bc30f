"""Twin fixtures of complex outputs: f(z) = z^2 of a complex input z, by a
``tf.custom_gradient``. Under TensorFlow's convention the gradient of a real
loss through a holomorphic f is dy * conj(f'(z)) = dy * conj(2 z); the wrong
twin returns dy * 2 z, the missed conjugate. Closed form of the check: with
z = x + iy, Re f = x^2 - y^2, Im f = 2xy, so d Re f / dx = 2x, d Re f / dy = -2y,
d Im f / dx = 2y, d Im f / dy = 2x (element-wise)."""

import numpy as np
import tensorflow as tf

Z = np.array([0.5 + 1.0j, -1.5 + 0.25j, 0.75 - 0.5j])


def square_model(conjugate: bool):
    @tf.custom_gradient
    def square(z):
        def grad(dy):
            d = 2.0 * z
            return dy * (tf.math.conj(d) if conjugate else d)

        return z * z, grad

    def model(z):
        return square(z)

    return model, {"z": Z}
