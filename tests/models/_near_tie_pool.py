"""Shared by ``by_layer_near_tie_pool.py`` and its wrong twin: a max pool
(3x3, strides 2, padding "same", as Xception's block3_pool) between the input
and a dense head, in float64, at an input whose windows hold near-ties:
horizontally adjacent pixels come in pairs whose gaps are spread
log-uniformly from 1e-11 to 3e-6, below the check's step (eps**(1/3)
max(1, |x|) = 6.1e-6 in float64, ``difference_rule.step_size``), as
Xception's pools hold thousands."""

import numpy as np
import keras
import tensorflow as tf

SHAPE = (16, 18, 4)
#: Gaps of the pairs: 10**U(LOG_GAPS).
LOG_GAPS = (-11.0, float(np.log10(3e-6)))
#: The wrong twin splits a window's gradient among the values within SPLIT of its maximum.
SPLIT = 1e-5


def inputs(rng):
    x = 0.1 + 0.1 * rng.random((2,) + SHAPE)
    gaps = 10.0 ** rng.uniform(*LOG_GAPS, (2, SHAPE[0], SHAPE[1] // 2, SHAPE[2]))
    x[:, :, 1::2, :] = x[:, :, 0::2, :] - gaps * rng.choice([-1.0, 1.0], gaps.shape)
    return {"x": x}


def _patches(x):
    """[batch, rows, columns, 9, channels]: the pool's windows (zero padding:
    the inputs are positive, so a padded zero is never a window's maximum)."""
    p = tf.image.extract_patches(x, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    shape = tf.shape(p)
    return tf.reshape(p, [shape[0], shape[1], shape[2], 9, x.shape[-1]])


@tf.custom_gradient
def split_max_pool(x):
    """TensorFlow's max pool, with a gradient that shares each window's
    upstream gradient equally among the values within SPLIT of its maximum:
    right where a window's maximum stands clear, wrong at near-ties."""

    def grad(dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            p = _patches(x)
            hits = tf.cast(tf.reduce_max(p, axis=3, keepdims=True) - p <= SPLIT, x.dtype)
            share = tf.stop_gradient(hits / tf.reduce_sum(hits, axis=3, keepdims=True))
            y = tf.reduce_sum(share * p, axis=3)
        return tape.gradient(y, x, output_gradients=dy)

    return tf.nn.max_pool2d(x, 3, 2, "SAME"), grad


class SplitMaxPool(keras.layers.Layer):
    def call(self, x):
        return split_max_pool(x)


def near_tie_model(wrong: bool):
    image = keras.Input(SHAPE, dtype="float64")
    pool = (SplitMaxPool(name="pool", dtype="float64") if wrong
            else keras.layers.MaxPooling2D(3, strides=2, padding="same", name="pool", dtype="float64"))
    flat = keras.layers.Flatten(name="flat", dtype="float64")(pool(image))
    # A head of ones: d output / d x_i is the number of windows whose maximum x_i is.
    head = keras.layers.Dense(2, name="head", dtype="float64", kernel_initializer="ones")
    return keras.Model(image, head(flat), name="near_ties")
