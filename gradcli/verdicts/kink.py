"""The kink rule: a non-differentiability the analytic value may sit on.

* ``kink``: the slopes from the left and from the right differ beyond their
  own error estimates AND a non-smooth op lies on the path
  (``excuses.nonsmooth``: relu, abs, max/min, tf.where, clip, a branch...). The
  analytic value is a valid subgradient when it lies between the slopes (not a
  failure); outside, it is a failure. Slopes that differ with no non-smooth op
  on the path are an ill-conditioned smooth function, never a kink:
  ``inconclusive`` (a failure), or ``mismatch`` when both slopes settle and the
  analytic value lies outside them. At a tie (a kink element whose value other
  elements of its input hold) between its slopes is not enough: the tied
  values are moved together too (``tied_kinks.tie_direction``), and a wrong
  derivative there fails the kink. Passing and zero pairs are scanned too:
  ``kink_suspects`` flags every element whose one-sided slopes from the
  central-difference evaluations (``finite_diff.one_sided``) disagree, and the
  ladder confirms them (a tie of a max passes the central difference). Slopes
  that agree are never a kink: an element that fails only because a kink lies
  inside the default step (or because the function varies too fast for it)
  passes when both settled slopes agree with the analytic value at smaller
  steps, with a warning that says which (``resolved_warning``).
* jump: f(x +- h) - f(x) does not shrink with h (``ladder.one_sided_ladder``)
  AND a non-smooth op on the path (a comparison, a select: a mask x != 0 at an
  exact 0). No derivative exists there, so no value can be refuted or
  confirmed: the element is a non-differentiability, named as a jump.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.results import EXPLANATIONS, KINK, Kink
from gradcli.verdicts import compare
from gradcli.verdicts.diagnosis import Diagnosis
from gradcli.verdicts.ladder import COLUMNS_PER_BATCH, ColumnSlopes
from gradcli.verdicts.phrases import count, site_list
from gradcli.verdicts.tied_kinks import shared_kinks, tie_direction

#: How many kinks a report keeps.
MAX_KINKS = 10
#: Columns of a passing pair whose kink suspects are examined on the ladder
#: (22 evaluations each): a bound on what the kink scan costs.
SCAN_COLUMNS = 4 * COLUMNS_PER_BATCH


def kink_suspects(one_sided, output, shape, tol) -> np.ndarray | None:
    """Elements (``shape`` = [output size, input size]) whose one-sided slopes
    from the central-difference evaluations (``finite_diff.one_sided``) differ
    by more than ``compare.allowed_error`` with their error estimate: candidates
    for a kink that the central difference averages away (a tie of a max)."""
    if not one_sided:
        return None
    left, right, error = (one_sided[k][output].reshape(shape[1], -1).T for k in ("left", "right", "error"))
    with np.errstate(invalid="ignore"):
        return compare.comparable(left, right) & (
            np.abs(left - right) > compare.allowed_error(left, right, error, tol)
        )


@dataclass
class KinkFinding:
    """What the kink rule found on the examined columns (each ``[output size,
    columns]``): the ladder's tests (``ladder.slope_tests``, ``settled``
    counting a locally constant f as settled), the kinks with their
    subgradient test, the jumps, the non-smooth ops that earn them, and the
    tie rule's refusals (None: no kink on a tie)."""

    gap: np.ndarray  # slopes that differ beyond their errors, not at a jump
    settled: np.ndarray
    between: np.ndarray
    agrees: np.ndarray
    jumped: np.ndarray
    is_kink: np.ndarray
    kink_ok: np.ndarray  # a kink whose analytic value is a subgradient
    kink_bad: np.ndarray  # a kink whose analytic value is none
    nonsmooth: list | None
    tie_refused: np.ndarray | None


def find_kinks(fd, pair, f0, a, cols, examined, slopes: ColumnSlopes, tol, evidence, others) -> KinkFinding:
    """The kink, jump and tie rules (module docstring) on the ``examined``
    elements of columns ``cols`` of the pair's block ``a``. Sets the pair's
    tie evidence (``tie_direction``, ``kinks_shared``)."""
    sub_a = a[:, cols]
    gap, settled, between, agrees = slopes.tests(sub_a, tol)
    gap &= examined & ~slopes.constant
    # f unchanged to the last bit at the smallest steps on both sides: both
    # slopes are exactly 0 there, with no round-off to resolve.
    settled |= slopes.constant
    # Jump rule: f(x +- h) - f(x) does not shrink with h (``one_sided_ladder``) AND a
    # non-smooth op on the path (a comparison, a select: a mask x != 0 at an
    # exact 0). No derivative exists there, so no value can be refuted or
    # confirmed: the element is a non-differentiability, named as a jump.
    jump = slopes.jump & examined & slopes.ran[None, :] & ~slopes.constant
    nonsmooth = evidence.nonsmooth if (gap.any() or jump.any()) else None
    jumped = jump if nonsmooth else np.zeros_like(jump)
    gap &= ~jumped
    # Kink rule: a gap AND a non-smooth op on the path. A gap without one (an
    # ill-conditioned smooth function) is never a kink.
    is_kink = gap if nonsmooth else np.zeros_like(gap)
    kink_ok = is_kink & between
    kink_bad = is_kink & ~between
    # Tie rule: kinks at elements that share their value with others are
    # tested along the direction that moves each group of tied values
    # together (``tie_direction``); the rows it refuses are no subgradient.
    tie_refused = tie_direction(fd, pair, f0, a, cols, is_kink, tol, others) if is_kink.any() else None
    if tie_refused is not None:
        kink_bad |= tie_refused
        kink_ok &= ~tie_refused
    if kink_bad.any():  # the evidence the layer pass's tie rule asks for
        pair.kinks_shared = shared_kinks(fd, pair, f0, cols, kink_bad, is_kink)
    return KinkFinding(gap, settled, between, agrees, jumped, is_kink, kink_ok, kink_bad, nonsmooth, tie_refused)


def kink_records(kinks, kink_bad, left, right, a, cols, y_shape, x_shape, tie_refused=None,
                 jumped=None) -> list[Kink]:
    """The first ``MAX_KINKS`` of ``kinks`` as report records."""
    rows, idx = np.nonzero(kinks)
    # Failures first, then by the width of the slope gap.
    order = sorted(range(len(rows)), key=lambda i: (
        not kink_bad[rows[i], idx[i]], -abs(right[rows[i], idx[i]] - left[rows[i], idx[i]])
    ))[:MAX_KINKS]
    return [
        Kink(
            output_index=compare.element_index(rows[i], y_shape),
            input_index=compare.element_index(cols[idx[i]], x_shape),
            left=float(left[rows[i], idx[i]]),
            right=float(right[rows[i], idx[i]]),
            analytic=float(a[rows[i], idx[i]]),
            subgradient=not bool(kink_bad[rows[i], idx[i]]),
            tie=tie_refused is not None and bool(tie_refused[rows[i], idx[i]]),
            jump=jumped is not None and bool(jumped[rows[i], idx[i]]),
        )
        for i in order
    ]


def jump_warning(n_jumps: int, nonsmooth) -> str:
    return (
        f"{count(n_jumps, 'element')} where the function jumps (a discontinuity: "
        f"|f(x +- h) - f(x)| does not shrink with the step, {site_list(nonsmooth)}): no derivative "
        "exists there, so finite differences can neither confirm nor refute the gradient"
    )


def scan_warning(n_suspect_columns: int) -> str:
    return (
        f"kink scan: {n_suspect_columns} columns have one-sided slopes that disagree at the "
        f"default step; the first {SCAN_COLUMNS} were examined"
    )


def resolved_warning(n_resolved: int, nonsmooth) -> str:
    """Elements that pass at smaller steps: a kink inside the default stencil
    (with a non-smooth op on the path) or a function too fast for the step."""
    if nonsmooth:
        return (
            f"{count(n_resolved, 'element')} with a kink within the finite-difference "
            f"step but not at the point ({site_list(nonsmooth)}): at smaller steps both one-sided "
            "slopes agree with the analytic value"
        )
    return (
        f"{count(n_resolved, 'element')} where the function varies too fast for "
        "the default step: at smaller steps both one-sided slopes agree with the analytic "
        "value"
    )


def near_tie_warning(n_resolved: int, gaps, steps, n_one_sided: int, nonsmooth) -> str:
    """Elements that pass on ladders started below their near-tie's gap
    (``ladder.near_tie_starts``): the evidence, their gaps against the step."""
    return (
        f"{count(n_resolved, 'element')} at near-ties ({site_list(nonsmooth)}): another element's "
        f"value lies {np.min(gaps):.2g} to {np.max(gaps):.2g} away, inside the finite-difference step "
        f"({np.max(steps):.2g}), a kink the central difference crosses; judged at steps below each "
        "gap" + (f" ({n_one_sided} whose nearer gap lies below the smallest step, by the one-sided "
                 "slope away from it)" if n_one_sided else "")
        + ", both one-sided slopes agree with the analytic value"
    )


def failed_kink(n_bad: int, n_outside: int, n_tie_refused: int, nonsmooth) -> Diagnosis:
    """Kinks where the analytic value is no subgradient: a failure."""
    return Diagnosis(KINK, True, (
        f"{EXPLANATIONS[KINK]}, and the analytic value is not a valid subgradient at "
        f"{n_bad} elements"
        + (f" ({n_outside} outside [left, right])" if n_outside else "")
        + (f" (tied elements moved together: {n_tie_refused} output elements' derivatives "
           "disagree)" if n_tie_refused else "")
        + f" ({site_list(nonsmooth)})"
    ))


def kinks_pass(n_kink: int, n_jumps: int, nonsmooth) -> Diagnosis:
    """Every explained element a valid subgradient at a kink, or a jump: not a failure."""
    explanation = "; ".join(
        ([f"{EXPLANATIONS[KINK]} at {n_kink} elements; the analytic value lies between them "
          "(a valid subgradient)"] if n_kink else [])
        + ([f"the function jumps at {count(n_jumps, 'element')} (a discontinuity: no "
            "derivative exists)"] if n_jumps else [])
    ) + f": not a failure ({site_list(nonsmooth)})"
    warnings = [
        f"{count(n_kink, 'element')} on a non-differentiability (kink): "
        "the analytic value is a subgradient there"
    ] if n_kink else []
    return Diagnosis(KINK, False, explanation, warnings)
