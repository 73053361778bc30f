"""A quantization-aware layer: ``fake_quant_with_min_max_vars`` with a fixed
range [-2, 2] (4 bits, step 4/15) after a dense map h = W x.

The output is piecewise constant in W and x (true derivative 0); the op's
gradient is the straight-through estimator: d/dW_ij = c_i x_j for h_i inside
the range, so at the point (h = [0.53, -1.14]) dW = c x^T with c = [1, 3].
"""

import numpy as np
import tensorflow as tf


def model(W, x):
    h = tf.linalg.matvec(W, x)
    q = tf.quantization.fake_quant_with_min_max_vars(h, -2.0, 2.0, num_bits=4)
    return tf.reduce_sum(q * tf.constant([1.0, 3.0]))


# The op exists for float32 only.
inputs = {
    "W": np.array([[0.5, -0.2, 0.3], [-0.7, 0.4, 0.1]], dtype=np.float32),
    "x": np.array([0.8, -0.15, 0.3], dtype=np.float32),
}
