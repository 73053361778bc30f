"""The twin of ``by_layer_near_tie_pool.py`` whose pool shares each window's
gradient among the values within 1e-5 of its maximum
(``_near_tie_pool.split_max_pool``): right wherever a maximum stands clear,
wrong at the near-ties (1/2 each where the right gradient is 1 and 0). It
must fail."""

from _near_tie_pool import inputs, near_tie_model  # noqa: F401

model = near_tie_model(wrong=True)
