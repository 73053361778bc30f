"""``prec_float16_custom.py`` in bfloat16: 2 sum(sin(x)) computed in bfloat16
inside, with a custom gradient of sin scaled by ``FACTOR``: 1 here (right);
``prec_bfloat16_bug.py`` takes 2 (the gradient twice the derivative 2 cos(x))."""

import tensorflow as tf

FACTOR = 1.0


def make_model(factor):
    @tf.custom_gradient
    def wave(x):
        def grad(upstream):
            return upstream * factor * tf.cos(x)

        return tf.sin(x), grad

    def model(x):
        low = tf.cast(x, tf.bfloat16)
        return tf.cast(tf.reduce_sum(wave(low) * 2.0), tf.float64)

    return model


model = make_model(FACTOR)
inputs = {"x": [0.3, -1.2, 0.7]}
