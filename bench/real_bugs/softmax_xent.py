"""tf.nn.softmax_cross_entropy_with_logits and reduce_logsumexp, correct.

Right verdict: pass.
"""

import tensorflow as tf

RIGHT = "pass"


def model(logits):
    labels = tf.constant([[0.2, 0.7, 0.1], [0.0, 0.0, 1.0]], tf.float64)
    return {
        "xent": tf.nn.softmax_cross_entropy_with_logits(labels, logits),
        "lse": tf.reduce_logsumexp(logits, axis=1),
    }


inputs = {"logits": [[1.0, -0.5, 2.0], [0.3, 0.3, -1.2]]}
