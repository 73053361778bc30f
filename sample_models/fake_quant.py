"""Fake quantisation with min/max taken from the data (quantisation-aware training).

tf.quantization.fake_quant_with_min_max_vars rounds x to 2^8 levels between
min and max; its gradient is the straight-through estimator (1 inside the
range), a surrogate: the function itself is piecewise constant, so its true
derivative is 0 almost everywhere. With min and max computed from x, the
extreme elements are reached by the straight-through gradient along several
paths (x itself, and through min/max).
"""

import numpy as np
import tensorflow as tf


def model(x):
    q = tf.quantization.fake_quant_with_min_max_vars(
        x, tf.reduce_min(x), tf.reduce_max(x), num_bits=8
    )
    return tf.reduce_sum(q * tf.constant([1.0, 2.0, 3.0, 4.0], x.dtype))


# The op exists for float32 only: gradcli checks it in float32 and says so.
inputs = {"x": np.array([-0.9, 0.13, 0.42, 1.1], dtype=np.float32)}
