"""The composition y = f(g(x)) of chain_inner.py (g) and chain_outer.py (f) in one model.

Its vector-Jacobian product equals the two halves' VJPs chained across files:
J^T c = (dh/dx)^T (dy/dh)^T c (see the README, "Inspecting derivatives").
"""

from chain_inner import inputs, model as inner  # noqa: F401 - gradcli reads `inputs`
from chain_outer import model as outer


def model(x):
    return outer(inner(x))
