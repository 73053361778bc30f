"""Verdicts: weigh analytic against numeric derivatives. numpy only.

The rule for one element (or one projection), written once and used by every
check:

    |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|) + FD_SAFETY * fd_error

where ``fd_error`` is the finite-difference error estimate (Richardson term
plus round-off bound, see ``finite_diff``). The estimate lets a large function
value (whose round-off grows with |f|) pass without loosening rtol, while rtol
stays tight enough that a gradient off by a relative 1e-5 fails in float64.

A pass only counts if finite differences could have seen a failure: when the
error estimate itself exceeds ``RESOLVE_FRACTION`` of the derivative's size, the
verdict is ``inconclusive`` (a failure), so float32 round-off never passes as
a verdict.
"""

from __future__ import annotations

import numpy as np

from gradcli.results import (
    DISCONNECTED,
    EXPLANATIONS,
    INCONCLUSIVE,
    MISMATCH,
    PASS,
    ZERO,
    Element,
    PairResult,
    Tolerance,
)

#: Default tolerances by the dtype the check runs in. float64: rtol 1e-6 sits
#: three orders above the Richardson error (about 1e-10 relative) and one below
#: the smallest bug we promise to catch (1e-5 relative). float32: its eps is
#: 1.2e-7 and the difference quotient loses about a third of the digits.
DEFAULT_TOLERANCES = {
    "float64": (1e-6, 1e-9),
    "float32": (1e-3, 1e-5),
    "float16": (3e-2, 1e-2),
    "bfloat16": (1e-1, 1e-2),
}
FD_SAFETY = 2.0
RESOLVE_FRACTION = 0.1
#: How many failing elements a report keeps (worst first).
MAX_FAILING = 10


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(str(dtype), DEFAULT_TOLERANCES["float32"])
    given = [n for n, v in (("rtol", rtol), ("atol", atol)) if v is not None]
    rule = f"defaults for {dtype}" + (f" ({', '.join(given)} from options)" if given else "")
    return Tolerance(
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
        rule=rule,
    )


def allowed_error(analytic, numeric, fd_error, tol: Tolerance):
    magnitude = np.maximum(np.abs(analytic), np.abs(numeric))
    return tol.atol + tol.rtol * magnitude + FD_SAFETY * fd_error


def compare_block(
    input_name: str,
    output_name: str,
    analytic: np.ndarray | None,
    numeric: np.ndarray,
    fd_error: np.ndarray,
    output_shape: tuple,
    input_shape: tuple,
    tol: Tolerance,
) -> PairResult:
    """Compare a full Jacobian block element by element.

    ``numeric`` and ``fd_error`` have shape ``[output size, input size]``;
    ``analytic`` too, or None where TensorFlow returned no gradient.
    """
    disconnected = analytic is None
    a = np.zeros_like(numeric) if disconnected else analytic.reshape(numeric.shape)
    diff = np.abs(a - numeric)
    allowed = allowed_error(a, numeric, fd_error, tol)
    bad = diff > allowed
    pair = _pair(input_name, output_name, "full", a, numeric, diff, fd_error, bad, allowed)
    pair.failing = _elements(a, numeric, diff, fd_error, bad, allowed, output_shape, input_shape)
    pair.worst = _elements(
        a, numeric, diff, fd_error, np.ones_like(bad), allowed, output_shape, input_shape, 1
    )[0] if a.size else None
    return _verdict(pair, a, numeric, fd_error, disconnected, tol)


def compare_projections(
    input_name: str,
    output_name: str,
    reverse: np.ndarray | None,
    forward: np.ndarray | None,
    numeric: np.ndarray,
    fd_error: np.ndarray,
    scale: np.ndarray,
    tol: Tolerance,
) -> PairResult:
    """Compare probes v^T J u: ``reverse`` = <u, J^T v> (None if disconnected),
    ``forward`` = <v, J u> (forward mode; None when checked elsewhere),
    ``numeric`` = <v, (J u) by differences>.

    Projections can cancel, so rtol is applied to ``scale`` = the Cauchy-Schwarz
    bound max(|v| |J u|, |u| |J^T v|) instead of the projection itself.
    """
    disconnected = reverse is None
    rev = np.zeros_like(numeric) if disconnected else reverse
    allowed = tol.atol + tol.rtol * scale + FD_SAFETY * fd_error
    reverse_bad = np.abs(rev - numeric) > allowed
    fwd = numeric if forward is None else forward
    forward_bad = np.abs(fwd - numeric) > allowed
    diff = np.maximum(np.abs(rev - numeric), np.abs(fwd - numeric))
    bad = reverse_bad | forward_bad
    pair = _pair(input_name, output_name, "fast", rev, numeric, diff, fd_error, bad, allowed)
    # Only the analytic-vs-numeric gaps say anything about accuracy of the projection.
    pair.max_rel_error = float(np.max(diff / np.maximum(scale, np.finfo(float).tiny), initial=0))
    ratio = diff / allowed
    order = np.argsort(-ratio)
    pair.failing = [
        _element([], [int(p)], rev[p], numeric[p], diff[p], fd_error[p], scale[p])
        for p in order if bad[p]
    ][:MAX_FAILING]
    if len(order):
        p = order[0]
        pair.worst = _element([], [int(p)], rev[p], numeric[p], diff[p], fd_error[p], scale[p])
    pair.reverse_failed = bool(reverse_bad.any())
    pair = _verdict(pair, rev, numeric, fd_error, disconnected, tol, scale=scale)
    if pair.verdict == MISMATCH:
        pair.explanation = _mode_explanation(pair.reverse_failed, bool(forward_bad.any()))
    return pair


def _mode_explanation(reverse_failed: bool, forward_failed: bool) -> str:
    return {
        (True, False): "reverse mode (the gradient) disagrees with finite differences; forward mode agrees",
        (False, True): "forward mode (ForwardAccumulator) disagrees with finite differences; reverse mode agrees",
        (True, True): "reverse and forward mode both disagree with finite differences",
    }[(reverse_failed, forward_failed)]


def forward_mismatch(forward, numeric, fd_error, scale, tol: Tolerance) -> np.ndarray:
    """Which probes' forward-mode projections disagree with the numeric ones (same rule)."""
    return np.abs(forward - numeric) > tol.atol + tol.rtol * scale + FD_SAFETY * fd_error


def apply_fail_on(pairs: list[PairResult], fail_on) -> None:
    """Pairs whose verdict is listed in ``fail_on`` fail, whatever the default
    rule decided (``results.FAIL_ON_WORDS``): the one place a user's choice
    overrides a verdict's pass."""
    for pair in pairs:
        if pair.verdict in fail_on and not pair.failed:
            pair.failed = True
            pair.explanation += f" (fails: fail_on lists {pair.verdict})"


def mark_forward_failure(pair: PairResult, probe: int, forward: float, numeric: float) -> None:
    """A pair whose output failed the joint forward-mode probes fails too, and says how."""
    if pair.failed and pair.verdict not in (MISMATCH, PASS, ZERO):
        return  # a more specific verdict (disconnected, inconclusive...) stands
    pair.explanation = _mode_explanation(pair.failed, True) + (
        f" (forward mode is probed along all inputs at once; probe {probe}: forward "
        f"{forward:.10g}, numeric {numeric:.10g})"
    )
    pair.verdict, pair.failed = MISMATCH, True


def _pair(input_name, output_name, mode, a, n, diff, fd_error, bad, allowed) -> PairResult:
    magnitude = np.maximum(np.abs(a), np.abs(n))
    rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=magnitude > 0)
    return PairResult(
        input=input_name,
        output=output_name,
        verdict=PASS,
        failed=False,
        mode=mode,
        max_abs_error=float(diff.max(initial=0.0)),
        max_rel_error=float(rel.max(initial=0.0)),
        fd_error=float(np.max(fd_error, initial=0.0)),
        compared=int(diff.size),
        n_failing=int(bad.sum()),
    )


def _verdict(pair, a, n, fd_error, disconnected, tol, scale=None) -> PairResult:
    """Pick the verdict word for a compared pair (see ``results.EXPLANATIONS``)."""
    magnitude = np.maximum(np.abs(a), np.abs(n)) if scale is None else scale
    numeric_zero = bool(np.all(np.abs(n) <= allowed_error(0.0, n, fd_error, tol)))
    if disconnected:
        pair.verdict = DISCONNECTED
        pair.failed = not numeric_zero
        pair.explanation = EXPLANATIONS[DISCONNECTED] + (
            f", but the output changes with it (numeric derivative up to "
            f"{np.abs(n).max():.3g})" if pair.failed else "; the numeric derivative is zero too"
        )
        if not pair.failed:
            pair.warnings.append(f"{pair.input} does not reach {pair.output}")
        return pair
    if pair.n_failing:
        pair.verdict, pair.failed = MISMATCH, True
        pair.explanation = EXPLANATIONS[MISMATCH]
        return pair
    if not np.any(a) and numeric_zero:
        pair.verdict = ZERO
        pair.explanation = EXPLANATIONS[ZERO]
        pair.warnings.append(f"the gradient of {pair.output} with respect to {pair.input} is zero")
        return pair
    significant = magnitude > tol.atol
    if np.any(significant) and np.max(FD_SAFETY * fd_error[significant]) > RESOLVE_FRACTION * np.max(
        magnitude[significant]
    ):
        pair.verdict, pair.failed = INCONCLUSIVE, True
        pair.explanation = (
            f"{EXPLANATIONS[INCONCLUSIVE]} (error estimate {pair.fd_error:.3g} against "
            f"derivatives of size {np.max(magnitude):.3g}); check in float64"
        )
        return pair
    pair.explanation = EXPLANATIONS[PASS]
    return pair


def _elements(a, n, diff, fd_error, mask, allowed, output_shape, input_shape, limit=MAX_FAILING):
    ratio = np.where(mask, diff / allowed, -np.inf).ravel()
    count = min(limit, int(np.count_nonzero(mask)))
    if count == 0:
        return []
    top = np.argpartition(-ratio, count - 1)[:count]
    top = top[np.argsort(-ratio[top])]
    rows, cols = np.unravel_index(top, a.shape)
    return [
        _element(
            _index(r, output_shape), _index(c, input_shape), a[r, c], n[r, c], diff[r, c],
            fd_error[r, c], max(abs(a[r, c]), abs(n[r, c])),
        )
        for r, c in zip(rows, cols)
    ]


def _index(flat: int, shape: tuple) -> list[int]:
    return [int(i) for i in np.unravel_index(int(flat), shape)] if shape else []


def _element(out_index, in_index, a, n, diff, fd_error, magnitude) -> Element:
    return Element(
        output_index=out_index,
        input_index=in_index,
        analytic=float(a),
        numeric=float(n),
        abs_error=float(diff),
        rel_error=float(diff / magnitude) if magnitude > 0 else 0.0,
        fd_error=float(fd_error),
    )
