"""A black box: plain numpy, no TensorFlow ops, so TensorFlow has no gradient.

y = [sin(x0) x1, x0^2 + exp(x1)] at x = [0.3, 0.7].
Closed form: dy/dx = [[cos(x0) x1, sin(x0)], [2 x0, exp(x1)]].
"""

import numpy as np


def model(x):
    x = np.asarray(x, dtype=np.float64)
    return np.stack([np.sin(x[0]) * x[1], x[0] ** 2 + np.exp(x[1])])


inputs = {"x": [0.3, 0.7]}
