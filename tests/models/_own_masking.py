"""A user's masking layer in front of a GRU, as a padded batch is fed: the
layer scales each step by 2 (a custom gradient), zeroes the steps that are all
zeros, and emits ``any(x[t] != 0)`` as its Keras mask (``compute_mask``), so
the GRU skips them. Step 2 of the first sequence is padding.

On that step the layer's floating output is 0 = 2 x, and moving one of its
elements by h unmasks it: the output becomes 2 h, continuous, but the mask it
emits flips, and the GRU after it reads that step. The layer's output (values
and mask) jumps there, so no derivative exists; TensorFlow's gradient is the
masked piece's, 0. ``SCALE_GRADIENT`` is the derivative the custom gradient
gives the kept steps (2 is right).
"""

import keras
import numpy as np
import tensorflow as tf


def model_with(scale_gradient: float):
    @tf.custom_gradient
    def doubled(x):
        def grad(upstream):
            return upstream * scale_gradient

        return 2.0 * x, grad

    class OwnMasking(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, x):
            kept = tf.reduce_any(tf.not_equal(x, 0.0), axis=-1, keepdims=True)
            return doubled(x) * tf.cast(kept, x.dtype)

        def compute_mask(self, x, mask=None):  # keras.ops: Sequential builds it on a symbolic input
            return keras.ops.any(keras.ops.not_equal(x, 0.0), axis=-1)

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3, 2)), OwnMasking(name="own_masking"), keras.layers.GRU(2)])


x = np.random.default_rng(5).uniform(-1.0, 1.0, (2, 3, 2)).astype(np.float32)
x[0, 2] = 0.0  # padding
