"""A model that computes in float16 inside, with a custom gradient of sin.

``wave`` is sin(x) computed in float16; ``grad`` scales the true derivative
cos(x) by ``FACTOR``: 1.0 here (correct). ``prec_float16_bug.py`` imports this
file with FACTOR = 0.8 (a 20% error, far above float16's tolerance of 3%);
``prec_bfloat16_custom.py`` computes the same in bfloat16 (``compute_dtype``).
"""

import tensorflow as tf

FACTOR = 1.0


def make_model(factor, compute_dtype=tf.float16):
    @tf.custom_gradient
    def wave(x):
        def grad(upstream):
            return upstream * factor * tf.cos(x)

        return tf.sin(x), grad

    def model(x):
        low = tf.cast(x, compute_dtype)
        return tf.cast(tf.reduce_sum(wave(low) * 2.0), tf.float64)

    return model


model = make_model(FACTOR)
inputs = {"x": [0.3, -1.2, 0.7]}
