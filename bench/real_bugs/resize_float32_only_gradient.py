"""A correct model whose image resize has a float32-only gradient.

``tf.image.resize(..., method="lanczos3")`` runs in float64, but the gradient
of its op (ScaleAndTranslateGrad) accepts float32 only: promoted to float64
the reverse pass raises, so the model is checked in its own float32.
f(img) = sum(resize(img)**2) / 2, so df/dimg = R^T R img with R the (linear)
resize.
"""

import numpy as np
import tensorflow as tf


def model(img):
    small = tf.image.resize(img, (3, 4), method="lanczos3")
    return tf.reduce_sum(small**2) / 2.0


inputs = {"img": np.linspace(-1.0, 1.0, 1 * 5 * 6 * 1, dtype=np.float32).reshape(1, 5, 6, 1)}

# bench/real_bugs: A lanczos resize whose gradient (ScaleAndTranslateGrad) accepts float32 only: checked in float32, not exit 3.
RIGHT = "pass"
