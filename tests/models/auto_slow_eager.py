"""A function whose eager call is slow in Python (a 100 ms sleep at every call)
while its traced evaluations are fast (the sleep runs once, at the trace), as a
Keras model's eager layer calls are against its traced ones: auto times its
differences rather than bounding them by the eager call."""
import time

import tensorflow as tf


def model(x):
    time.sleep(0.1)
    return tf.reduce_sum(tf.sin(x) * x)


def inputs(rng):
    return {"x": rng.standard_normal(2000)}
