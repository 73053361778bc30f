"""Max over windows of 4 whose gradient sends each window's full upstream
gradient to *every* element that attains the maximum. Every window is
(v, v, a, b) with a, b < v: a tie of two at the maximum. Each element lies
between its own one-sided slopes (0 and 1), yet no subgradient of a max gives
two tied elements 1 each: moving both by t moves the max by t, and this
gradient says 2 t. Its twin ``earn_tie_first_max.py`` gives the first maximum
of each window the whole gradient (TensorFlow's max-pool rule): a subgradient."""

from _tie_windows import tie_max_model, tie_windows

model = tie_max_model(first_only=False)
inputs = tie_windows
