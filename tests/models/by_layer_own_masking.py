"""``_own_masking.py`` with the right gradient: the layer pass finds its
padded step a jump of the layer (its emitted mask flips), and passes."""

from _own_masking import model_with, x

model = model_with(2.0)
inputs = {"x": x}
