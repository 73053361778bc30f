"""``prec_float16_far.py`` with its gradient 2x off where |x| > 0.9
(``_float16_far.py``): a mismatch with the custom gradient as its culprit."""

from _float16_far import X, make_model

model = make_model(2.0)
inputs = {"x": X}
