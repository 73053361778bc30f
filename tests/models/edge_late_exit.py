"""A model that runs twice (the forward passes at load) and then ends the
process with sys.exit(0) in the middle of the analysis: must not read as a pass."""
import sys

import tensorflow as tf

calls = []


def model(x):
    calls.append(1)
    if len(calls) > 2:
        sys.exit(0)
    return x * x


inputs = {"x": [1.0, 2.0]}
