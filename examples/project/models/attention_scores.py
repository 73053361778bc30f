"""Scaled dot-product attention weights, softmax(q k^T / sqrt(d)): a correct
model (its gradient is TensorFlow's own), so it passes."""

import numpy as np
import tensorflow as tf


def model(q, k):
    scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(q.shape[-1])
    return tf.nn.softmax(scores, axis=-1)


def inputs(rng: np.random.Generator):
    return {"q": rng.standard_normal((2, 3)), "k": rng.standard_normal((4, 3))}
