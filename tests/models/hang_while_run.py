"""A model whose forward pass never returns (a deadlock, an endless loop): with
``--timeout`` its worker is stopped and it becomes an error row (exit 3)."""

import time

import numpy as np
import tensorflow as tf


def model(x):
    while True:  # never returns
        time.sleep(1.0)
    return tf.reduce_sum(x**2)


inputs = {"x": np.array([1.0, 2.0])}
