"""A correct model whose values reach 1e4: sum(x^3 / 3) + 100 x at x near 20."""
import tensorflow as tf


def model(x):
    return {"cubic": x**3 / 3.0 + 100.0 * x, "sum": tf.reduce_sum(x**3)}


inputs = {"x": [21.0, -19.5, 18.25]}
