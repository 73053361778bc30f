"""``prec_float16_custom.py`` in bfloat16: 2 sum(sin(x)) computed in bfloat16
inside, with a custom gradient of sin scaled by ``FACTOR``: 1 here (right);
``prec_bfloat16_bug.py`` takes 2 (the gradient twice the derivative 2 cos(x))."""

from functools import partial

import tensorflow as tf
from prec_float16_custom import inputs  # noqa: F401
from prec_float16_custom import make_model as make_float16_model

FACTOR = 1.0

make_model = partial(make_float16_model, compute_dtype=tf.bfloat16)
model = make_model(FACTOR)
