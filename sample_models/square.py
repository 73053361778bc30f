"""y = x * x at x = [1, 2]: the Jacobian is diag(2x) = [[2, 0], [0, 4]]."""

import tensorflow as tf


def model(x):
    return x * x


inputs = {"x": [1.0, 2.0]}
