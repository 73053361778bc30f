"""Tuples in and out: `pair` is a tuple of two arrays, the outputs nest a
dict and a tuple (outputs parts.p, parts.q.0, parts.q.1)."""
import numpy as np
import tensorflow as tf


def model(pair):
    a, b = pair
    return {"parts": {"p": a * b, "q": (a + b, tf.sin(a) - b)}}


inputs = {"pair": (np.array([1.0, -2.0]), np.array([3.0, 0.5]))}
