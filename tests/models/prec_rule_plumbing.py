"""A correct float64 model with float32 plumbing beside its values: a seeded
float32 random draw, float32 casts of its shape and size, a float32 counter
in a ``tf.while_loop``. None carries x, so float64 rules apply.

noise = stateless_normal(shape of x, seed (4, 2)) in float32;
n = size of x; w_i = i (a float32 range over the shape);
f(x) = sum(sin(x) (1 + noise / 10) (1 + w / n)) + 3 * sum(x**2) (three loop
turns counted in float32);
df/dx_i = cos(x_i) (1 + noise_i / 10) (1 + i / n) + 6 x_i.
"""

import tensorflow as tf

SEED = (4, 2)


def model(x):
    noise = tf.random.stateless_normal(tf.shape(x), seed=SEED, dtype=tf.float32)
    n = tf.cast(tf.size(x), tf.float32)
    w = tf.range(tf.cast(tf.shape(x)[0], tf.float32), dtype=tf.float32) / n
    scale = tf.cast((1.0 + noise / 10.0) * (1.0 + w), tf.float64)

    def body(i, total):
        return i + tf.constant(1.0, tf.float32), total + tf.reduce_sum(x**2)

    _, squares = tf.while_loop(
        lambda i, total: i < 3.0, body, (tf.constant(0.0, tf.float32), tf.constant(0.0, tf.float64))
    )
    return tf.reduce_sum(tf.sin(x) * scale) + squares


inputs = {"x": [0.3, -1.2, 2.0, 0.7, 1.1]}
