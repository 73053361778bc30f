"""Takes a minute to import (for interrupt tests: the workers are busy when Ctrl-C comes)."""
import time

time.sleep(60)

inputs = {"x": [1.0, 2.0]}


def model(x):
    return x * x
