"""Helpers a model file imports, each cutting the gradient's path inside
itself, not in the model file (tests/test_samplers_and_cuts.py)."""

import numpy as np
import tensorflow as tf


def shifted(y):
    """y moved one place along its last axis, a zero in front: computed in
    numpy whenever the value is known (eagerly it always is), as TensorFlow
    Probability's prefer_static helpers do. The copy is a constant to a tape."""
    known = tf.get_static_value(y)
    if known is not None:
        return tf.constant(np.concatenate([np.zeros_like(known[..., :1]), known[..., :-1]], axis=-1))
    return tf.concat([tf.zeros_like(y[..., :1]), y[..., :-1]], axis=-1)


def differences(y):
    """y_i - y_{i-1}: d/dy_{i-1} is -1, but the tape sees none of it eagerly."""
    return y - shifted(y)


def held_shift(y):
    """y moved one place, behind a tf.stop_gradient."""
    return tf.stop_gradient(tf.concat([tf.zeros_like(y[..., :1]), y[..., :-1]], axis=-1))
