"""y = 2x, but log_det_jacobian forgets to return."""
import numpy as np


def model(x):
    return 2.0 * x


def log_det_jacobian(x):
    x.shape  # noqa: B018 - the missing return is the point


inputs = {"x": np.ones((2, 2))}
