"""The twin of ``earn_tie_every_max.py``: the same windows of 4 with a tie of
two at each maximum, and a gradient that gives the first maximum of each window
the whole upstream gradient (TensorFlow's max-pool rule): the gradient of one
active piece, a subgradient. Moving both tied elements by t moves the max by t,
and this gradient says t."""

from _tie_windows import tie_max_model, tie_windows

model = tie_max_model(first_only=True)
inputs = tie_windows
