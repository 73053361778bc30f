"""max(x, y) element by element at x = y, with a gradient that gives both x
and y the full upstream gradient: each lies between its own one-sided slopes
(0 and 1), but moving x and y together by t moves the max by t, where this
gradient says 2 t. The tie is across two inputs, so the tie rule moves
both (``diagnose.tie_direction``). ``USE_TENSORFLOW`` (the twin,
``earn_tie_across_inputs_tf.py``): TensorFlow's own ``tf.maximum``, whose
gradient goes to x where x >= y: a subgradient."""

import tensorflow as tf

USE_TENSORFLOW = False


@tf.custom_gradient
def both_max(x, y):
    top = tf.maximum(x, y)

    def grad(dy):
        return dy * tf.cast(x >= y, x.dtype), dy * tf.cast(y >= x, y.dtype)

    return top, grad


def model(x, y):
    return {"m": tf.maximum(x, y) if USE_TENSORFLOW else both_max(x, y)}


def inputs(rng):
    x = rng.standard_normal(8)
    return {"x": x, "y": x.copy()}
