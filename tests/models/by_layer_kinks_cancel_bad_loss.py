"""The network of by_layer_kinks_cancel.py (relu kinks that cancel, exactly
at 0 on its padding rows), trained with a custom loss whose gradient is
wrong (1.5 d where d**2 needs 2 d): a bug outside every layer."""

import tensorflow as tf

from by_layer_kinks_cancel import inputs, model  # noqa: F401 - the model file's names


@tf.custom_gradient
def _squared(d):
    return d * d, lambda dy: dy * 1.5 * d  # should be 2 d


def loss(y_true, y_pred):
    return tf.reduce_mean(_squared(y_pred - y_true), -1)
