"""Twin float16 fixtures: a gradient wrong by 2x where the finite differences'
one-sided slopes do not settle (issue 35, item 6).

``make_model(factor)``: ``scale`` is the identity in float16 whose custom
gradient multiplies the upstream gradient by ``factor`` where |x| > 0.9 (by 1
elsewhere); the model is tanh(2 scale(float16(x))), elementwise, so

    dy_i / dx_i = 2 (1 - tanh(2 x_i)**2)     (x_i rounded to float16)

and the wrong twin's gradient is ``factor`` times that where |x_i| > 0.9. At
x near 1 the derivative is about 0.1 to 0.3 and float16's one-sided slopes do
not settle to a tenth, but the central difference, its error estimate under
0.02, refutes a gradient 2x off there: a mismatch, not "too noisy". Right
twin: ``prec_float16_far.py``; wrong: ``prec_float16_far_bug.py``.
"""

import numpy as np
import tensorflow as tf

X = np.array([0.15, 0.3, 0.99, 1.05, 1.14, 1.2])


def make_model(factor):
    @tf.custom_gradient
    def scale(x):
        def grad(upstream):
            far = tf.abs(x) > 0.9
            return upstream * tf.where(far, tf.constant(factor, x.dtype), tf.constant(1.0, x.dtype))

        return x * 1.0, grad

    def model(x):
        return tf.cast(tf.tanh(2.0 * scale(tf.cast(x, tf.float16))), tf.float64)

    return model


def derivative(x):
    """The exact derivative in float64 at x rounded to float16 (numpy)."""
    x16 = np.asarray(x, dtype=np.float16).astype(np.float64)
    return 2.0 * (1.0 - np.tanh(2.0 * x16) ** 2)
