"""An exponential draw, -log(u) * scale, that draws another u when a gradient
is recorded: the class of TensorFlow Probability's Gamma and Beta samplers
(whose implementation TensorFlow picks by whether the call is
differentiated), written by hand. The gradient is -log(u_taped) where finite
differences see -log(u_plain)."""

import tensorflow as tf
from tensorflow.python.eager import record

PLAIN_SEED, TAPED_SEED = (1, 2), (3, 4)


def model(scale):
    seed = TAPED_SEED if record.could_possibly_record() else PLAIN_SEED
    u = tf.random.stateless_uniform(tf.shape(scale), seed=seed, dtype=scale.dtype)
    return -tf.math.log(u) * scale


inputs = {"scale": [0.5, 1.0, 2.0]}
