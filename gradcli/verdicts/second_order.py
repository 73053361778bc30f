"""The wording of a failing second-derivative pair (``order=2``): which route
to the Hessian-vector product agrees with finite differences of the gradient.
A route that agrees while the other does not points at the rule that is
wrong: forward-over-reverse uses the ops' forward rules (JVPs) of the
gradient, reverse-over-reverse their second reverse rules.
"""

from __future__ import annotations

from gradcli.results import EXPLANATIONS, MISMATCH, PairResult


def second_derivative_routes(pair: PairResult, forward_bad: int, reverse_bad: int, total: int, what: str) -> None:
    """A failing pair's explanation says which second-derivative route agrees
    with finite differences: forward-over-reverse (``ForwardAccumulator`` over
    the gradient), reverse-over-reverse (the gradient of <gradient, v>)."""
    if not pair.failed or pair.verdict != MISMATCH:
        return
    def count(bad):
        return "agrees" if bad == 0 else f"disagrees ({bad} of {total} {what} outside tolerance)"
    agreeing = [name for name, bad in (("forward-over-reverse", forward_bad),
                                       ("reverse-over-reverse", reverse_bad)) if bad == 0]
    which = (f"{agreeing[0]} agrees with finite differences" if agreeing
             else "neither forward-over-reverse nor reverse-over-reverse agrees with finite differences")
    routes = (
        f"second derivative: {which} (forward-over-reverse {count(forward_bad)}; "
        f"reverse-over-reverse {count(reverse_bad)})"
    )
    generic = pair.explanation == EXPLANATIONS[MISMATCH] or pair.explanation.startswith(
        ("reverse mode", "forward mode", "reverse and forward"))  # compare's first-order words
    pair.explanation = routes if generic or not pair.explanation else f"{pair.explanation}; {routes}"
