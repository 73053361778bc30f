"""The curvature verdicts of ``gradcli hessian``: the definiteness of a Hessian
from its extreme eigenvalues, and whether it meets an expectation
(``expect``: convex or concave).

Rule: an eigenvalue within ``zero_tol`` of 0 counts as zero (how
``zero_tol`` is derived from the round-off of the eigensolver and the
Hessian's own error is ``gradcli.analyses.hessian``'s); all eigenvalues above
it is positive definite, all below its negative negative definite, all within
it zero, none below it (above) positive (negative) semidefinite, else
indefinite.
"""

from __future__ import annotations

from gradcli.results.hessian import (
    CONCAVE_VERDICTS, CONVEX_VERDICTS, INDEFINITE, NEGATIVE_DEFINITE, NEGATIVE_SEMIDEFINITE,
    POSITIVE_DEFINITE, POSITIVE_SEMIDEFINITE, ZERO,
)


def classify(smallest: float, largest: float, zero_tol: float) -> str:
    """Definiteness from the extreme eigenvalues (see the module docstring)."""
    if smallest > zero_tol:
        return POSITIVE_DEFINITE
    if largest < -zero_tol:
        return NEGATIVE_DEFINITE
    if smallest >= -zero_tol and largest <= zero_tol:
        return ZERO
    if smallest >= -zero_tol:
        return POSITIVE_SEMIDEFINITE
    if largest <= zero_tol:
        return NEGATIVE_SEMIDEFINITE
    return INDEFINITE


def meets(verdict: str, expect: str) -> bool:
    return verdict in (CONVEX_VERDICTS if expect == "convex" else CONCAVE_VERDICTS)
