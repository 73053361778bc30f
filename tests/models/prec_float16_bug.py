"""float16 compute with a wrong custom gradient: 0.8 cos(x) for d/dx sin(x).

The derivative of 2 sum(sin(x)) is 2 cos(x); the gradient gives 1.6 cos(x).
"""

from prec_float16_custom import inputs, make_model  # noqa: F401

model = make_model(0.8)
