"""Differences y_i - y_{i-1} whose shifted copy a helper module computes in
numpy (_cut_helpers.shifted): the path is cut there, not in this file."""

from _cut_helpers import differences


def model(y):
    return differences(y)


inputs = {"y": [0.3, 1.1, -0.4, 2.0]}
