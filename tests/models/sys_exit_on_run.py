"""Calls sys.exit(0) when it is run: in gradcli's own process that would end the run as a pass."""
import sys

inputs = {"x": [1.0, 2.0]}


def model(x):
    sys.exit(0)
