"""The Taylor remainder test's verdict: what the observed order says.

The remainders and their orders are ``numerics.taylor``'s. Order >= 1.7 reads
"second order" (consistent), 0.7..1.3 "first order" (wrong gradient, or a
kink), and no usable step "exact" (s is linear along u, so the remainder is
round-off at every step). A non-finite slope or remainder reads "not finite",
never "exact".
"""

from __future__ import annotations

from gradcli.numerics.taylor import Remainders, remainders
from gradcli.results import Taylor

#: Observed orders from this up read "second order": a right gradient's
#: remainder shrinks like h**2.
SECOND_ORDER = 1.7
#: Observed orders within these bounds read "first order": a wrong gradient's
#: remainder shrinks only like h.
FIRST_ORDER = (0.7, 1.3)


def taylor_test(model, fd, name: str, output: str, seed: int = 0) -> Taylor | None:
    """The Taylor remainder test of one pair, with its verdict; None when the
    gradient has the wrong shape."""
    found = remainders(model, fd, name, output, seed)
    if found is None:
        return None
    return Taylor(
        steps=found.steps,
        remainders=found.remainders,
        orders=found.orders,
        order=found.order,
        verdict=reading(found),
    )


def reading(found: Remainders) -> str:
    """The verdict of the module docstring."""
    if not found.finite:
        return "not finite"  # a NaN remainder is never "exact" (compare's NaN rule)
    if found.order is None:
        return "exact" if not found.any_usable else "unclear"
    if found.order >= SECOND_ORDER:
        return "second order"
    if FIRST_ORDER[0] <= found.order <= FIRST_ORDER[1]:
        return "first order"
    return "unclear"
