"""y = sin(x) * x for 20,000 elements: every dense Jacobian or Hessian of it is
20000 x 20000 (3.2 GB in float64), the size of issue 10's memory blow-up."""
import numpy as np
import tensorflow as tf

inputs = {"x": np.linspace(-1.0, 1.0, 20_000)}


def model(x):
    return tf.sin(x) * x
