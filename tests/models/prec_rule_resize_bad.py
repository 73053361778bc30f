"""A float32 model whose resize gradient is scaled 2% too large by a custom
gradient; the resize's own gradient (ScaleAndTranslateGrad) accepts float32
only, so the check runs in float32 and must still fail.

f(img) = sum(resize(img)**2) / 2; the reported gradient is 1.02 R^T R img
against the truth R^T R img, R the (linear) lanczos3 resize.
"""

import numpy as np
import tensorflow as tf

ERROR = 0.02


@tf.custom_gradient
def shrink(img):
    small = tf.image.resize(img, (3, 4), method="lanczos3")

    def grad(upstream):
        with tf.GradientTape() as tape:
            tape.watch(img)
            again = tf.image.resize(img, (3, 4), method="lanczos3")
        return tape.gradient(again, img, output_gradients=upstream) * (1.0 + ERROR)

    return small, grad


def model(img):
    return tf.reduce_sum(shrink(img) ** 2) / 2.0


inputs = {"img": np.linspace(-1.0, 1.0, 1 * 5 * 6 * 1, dtype=np.float32).reshape(1, 5, 6, 1)}
