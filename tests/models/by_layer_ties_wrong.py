"""The network of ``by_layer_ties.py`` with its pool written by hand: the
forward pass is the same max over windows of 3, but the gradient sends the
window's full upstream gradient to *every* element that attains its maximum.
Off the ties (one maximum per window) that is the max's gradient, so the pool
passes at any nearby point; at the relu zeros' ties it counts each tied element
in full, which no subgradient does: moved together, the tied zeros of a window
move its maximum by one step, not by one per tied element."""

import numpy as np
import keras
import tensorflow as tf


@tf.custom_gradient
def window_max(x):
    """max over x[:, j:j + 3] for every j (MaxPooling1D(3, strides=1))."""
    windows = tf.stack([x[:, :-2], x[:, 1:-1], x[:, 2:]], axis=2)  # [batch, steps - 2, 3, channels]
    top = tf.reduce_max(windows, axis=2)

    def grad(dy):
        hits = tf.cast(tf.equal(windows, top[:, :, None, :]), dy.dtype) * dy[:, :, None, :]
        return (tf.pad(hits[:, :, 0], [[0, 0], [0, 2], [0, 0]])
                + tf.pad(hits[:, :, 1], [[0, 0], [1, 1], [0, 0]])
                + tf.pad(hits[:, :, 2], [[0, 0], [2, 0], [0, 0]]))

    return top, grad


class HandPool(keras.layers.Layer):
    def call(self, x):
        return window_max(x)


series = keras.Input((12, 4))
rectified = keras.layers.ReLU(name="relu")(series)
pooled = HandPool(name="pool")(rectified)
model = keras.Model(series, keras.layers.Dense(2, name="head")(keras.layers.Flatten(name="flat")(pooled)), name="ties")


def inputs(rng):
    x = rng.standard_normal((2, 12, 4))
    x[:, 3:10, :] = -1.0 - rng.random((2, 7, 4))  # relu zeros in runs of 7: tied windows
    return {"x": x.astype("float32")}
