"""Keras' own max pool (right) at an input whose windows hold near-ties
closer than the check's step (``_near_tie_pool.py``): the kinks the
differences cross, judged at steps below each gap, must pass."""

from _near_tie_pool import inputs, near_tie_model  # noqa: F401

model = near_tie_model(wrong=False)
