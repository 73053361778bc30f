"""A coupling bijector whose gradients are right and whose declared log-det is wrong.

A ``tfb.Bijector`` subclass on R^4: x_a = x[..., :2] kept, x_b = x[..., 2:]
mapped to x_b * exp(s) + t with s = tanh(x_a A + a), t = x_a B + b, written
with plain TensorFlow ops (no custom gradient). The Jacobian is triangular
with diagonal (1, 1, exp(s)), so log|det J| = sum(s); its
``_forward_log_det_jacobian`` returns sum(exp(s)), the scale where its
logarithm belongs.
"""

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

A = np.array([[0.6, -0.4], [0.3, 0.8]])
a = np.array([0.1, -0.2])
B = np.array([[0.5, 0.2], [-0.7, 0.4]])
b = np.array([0.3, 0.1])


class Coupling(tfp.bijectors.Bijector):
    def __init__(self):
        super().__init__(forward_min_event_ndims=1, name="coupling")

    def _log_scale_and_shift(self, xa):
        s = tf.tanh(xa @ tf.constant(A, xa.dtype) + tf.constant(a, xa.dtype))
        return s, xa @ tf.constant(B, xa.dtype) + tf.constant(b, xa.dtype)

    def _forward(self, x):
        s, t = self._log_scale_and_shift(x[..., :2])
        return tf.concat([x[..., :2], x[..., 2:] * tf.exp(s) + t], axis=-1)

    def _inverse(self, y):
        s, t = self._log_scale_and_shift(y[..., :2])
        return tf.concat([y[..., :2], (y[..., 2:] - t) * tf.exp(-s)], axis=-1)

    def _forward_log_det_jacobian(self, x):
        s, _ = self._log_scale_and_shift(x[..., :2])
        return tf.reduce_sum(tf.exp(s), axis=-1)  # BUG: the log-scale s itself


flow = Coupling()


def model(x):
    return flow.forward(x)


def log_det_jacobian(x):
    return flow.forward_log_det_jacobian(x, event_ndims=1)


inputs = {"x": np.array([[0.2, -0.5, 0.7, 1.1], [-0.9, 0.4, -0.3, 0.6], [1.3, 0.8, -1.2, -0.4]])}
