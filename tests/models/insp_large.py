"""y = x * x for 100 elements x = 0.1, 0.2, ..., 10: outputs and Jacobian too large to print whole.

Closed form: dy/dx = diag(2x); the largest entry is 20 at (99, 99).
"""

import numpy as np


def model(x):
    return x * x


inputs = {"x": np.arange(1, 101) / 10.0}
