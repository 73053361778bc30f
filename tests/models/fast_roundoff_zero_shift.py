"""A derivative that is exactly 0 by an invariance, in a function of large
output: 3e4 sum(softmax(x + b) * W) with b shifting every logit of a row by
the same amount, which the softmax ignores (an attention key's bias). Along
a random probe of b the difference quotient is pure round-off, 8 eps |f| / h,
above a tenth of nothing at the default step and at 16 times it; at 256 times
it the round-off is below the tolerance and the truncation is still 0 (f does
not change along b at all). The gradient is right: 0 for b."""

import numpy as np
import tensorflow as tf

W = tf.constant(np.random.default_rng(1).standard_normal((6, 16)))


def model(x, b):
    return 3e4 * tf.reduce_sum(tf.nn.softmax(x + b[:, None], axis=-1) * W)


inputs = {"x": np.random.default_rng(2).standard_normal((6, 16)), "b": np.random.default_rng(3).standard_normal(6)}
