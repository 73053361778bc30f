"""Segfaults (reads address 0 through ctypes) when it is run."""
import ctypes

inputs = {"x": [1.0, 2.0]}


def model(x):
    ctypes.string_at(0)
    return x * x
