"""1,600 parameters (more than one batch of first-pass differences): auto times one."""
import numpy as np
import tensorflow as tf


def model(W, x):
    return tf.reduce_sum(tf.tanh(tf.matmul(x, W)))


def inputs(rng):
    return {"W": rng.standard_normal((40, 40)) / 6.0, "x": rng.standard_normal((4, 40))}


wrt = ["W"]
