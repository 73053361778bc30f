"""y = x * x at x = [1, 2], from a model file that registers an exit handler
writing "ran" to the file named by GRADCLI_TEST_MARKER: checked in gradcli's
own process, its handlers run when the command ends, as at any exit."""
import atexit
import os

import numpy as np

inputs = {"x": np.array([1.0, 2.0])}


def _mark():
    with open(os.environ["GRADCLI_TEST_MARKER"], "w") as handle:
        handle.write("ran")


atexit.register(_mark)


def model(x):
    return x * x
