"""A gradient check inside an ordinary test: ``assert_gradients_ok`` fails
with the report ``gradcli check`` prints."""

import tensorflow as tf

from gradcli.testing import assert_gradients_ok


@tf.custom_gradient
def clipped_relu(x):
    def grad(upstream):
        return upstream * tf.cast((x > 0) & (x < 6), x.dtype)

    return tf.clip_by_value(x, 0.0, 6.0), grad


def test_clipped_relu_gradient():
    # inputs as a tuple, one array per parameter (as torch's gradcheck takes them)
    assert_gradients_ok(clipped_relu, inputs=([-1.0, 0.5, 3.0, 7.0],))
