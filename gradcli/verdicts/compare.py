"""Verdicts: weigh analytic against numeric derivatives. numpy only.

The rule for one element (or one projection), written once and used by every
check:

    |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|) + FD_SAFETY * fd_error

where ``fd_error`` is the finite-difference error estimate (Richardson term
plus round-off bound, see ``finite_diff``). The estimate lets a large function
value (whose round-off grows with |f|) pass without loosening rtol, while rtol
stays tight enough that a gradient off by a relative 1e-5 fails in float64.

Comparable (``comparable``): a value pair is compared only when both sides are
finite. A NaN or Inf on either side is never within tolerance: it counts as a
failing element in every mode and order, and the verdict says which side is
not finite (``_verdict``). This is the one place that decides it.

A pass only counts if finite differences could have seen a failure: when the
error estimate itself exceeds ``RESOLVE_FRACTION`` of the derivative's size
(``RESOLVE_FRACTIONS`` for bfloat16; ``Tolerance.resolve`` carries it), the
verdict is ``inconclusive`` (a failure), so float32 round-off never passes as
a verdict. Zero rule: when every analytic value is exactly 0 and every numeric
value lies within its resolution (``allowed_error`` at analytic 0), the verdict
is ``zero`` with that resolution stated, never ``inconclusive``: an exact zero
is the one value finite differences can confirm without resolving a size.

Projections (fast mode, ``compare_projections``): a probe p compares
a_p = <u, J^T v> with n_p = <v, (J u) by differences>, and

    allowed_p = atol |u| |v| + rtol F + FD_SAFETY * fd_error_p + ANALYTIC_ULPS * eps |u| |v| F

with F = ||J||_F estimated from the probes (E|J u|^2 = ||J||_F^2 for standard
normal u; ``projection_scale``). Why each term: per-element errors e_ij move
v^T J u by sum v_i e_ij u_j; errors within atol, or within rtol |J_ij|, of
unrelated signs (round-off is) give a spread of atol |u| |v| and about rtol F
(the mean square of rtol^2 sum v_i^2 J_ij^2 u_j^2 is rtol^2 F^2), so a model
full mode passes passes here too. fd_error_p is the numeric side's own error
estimate; the analytic side's round-off is bounded by the dot products'
sum |v_i| |J_ij| |u_j| <= |u| |v| F times ANALYTIC_ULPS eps. This replaces
rtol times the Cauchy-Schwarz scale |v| |J u| (about sqrt(m) F for m outputs, up
to sqrt(m n) F), which hid a single element wrong by 0.1% among 6,000. The one
case it is stricter than full mode: errors of one sign on every element, near
rtol each (a gradient scaled by 1 + rtol), which fail once |v^T J u| > F.

Shape rule (``wrong_shape``): an input whose reverse-mode gradient has another
shape than the input (``autodiff.WrongShape``: a scalar for a per-channel
parameter, a broadcastable ``(1, n)`` for ``(n,)``) is a ``mismatch`` whatever
the values: backpropagation would broadcast it or fail, and no element can be
compared. The pair states both shapes; the other inputs are compared as usual.

Fast mode's power (``detectable_error``): a single element J_ij wrong by d moves
probe p by d v_i u_j, a product of two independent standard normals. It fails
with probability >= DETECT_PROBABILITY over the probes once
|d| >= max_p allowed_p / q, where q solves P(|Z1 Z2| < q)**probes =
1 - DETECT_PROBABILITY.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from gradcli.numerics.difference_rule import machine_eps
from gradcli.results import (
    DISCONNECTED,
    EXPLANATIONS,
    INCONCLUSIVE,
    MISMATCH,
    PASS,
    ZERO,
    Element,
    PairResult,
    Power,
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
#: The same fraction where the dtype's round-off cannot reach a tenth. A central
#: difference at the step rule's h = eps**(1/3) max(1, |x|) resolves a derivative
#: to about eps**(2/3) |f|: float16's (eps 2**-10) is a few percent, within a
#: tenth, and float16 models pass at it; bfloat16's eps, 2**-7, is 8 times
#: float16's, so its quotients resolve 8**(2/3) = 4 times less, and the tenth
#: float16 passes at becomes 0.4. A gradient 2x off still fails (its error is the
#: size of the derivative, beyond rtol plus the error estimate).
RESOLVE_FRACTIONS = {"bfloat16": 0.4}
#: How many failing elements a report keeps (worst first).
MAX_FAILING = 10
#: Round-off of an analytic projection, in units of eps |u| |v| ||J||_F, which
#: already bounds the sum of |terms| of both dot products; 16 leaves a few ulps
#: for each of the ops of the model's own reverse pass.
ANALYTIC_ULPS = 16.0
#: Fast mode states the smallest single-element error it would see with this
#: probability over its random probes.
DETECT_PROBABILITY = 0.95


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(str(dtype), DEFAULT_TOLERANCES["float32"])
    given = [n for n, v in (("rtol", rtol), ("atol", atol)) if v is not None]
    rule = f"defaults for {dtype}" + (f" ({', '.join(given)} from options)" if given else "")
    return Tolerance(
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
        rule=rule,
        resolve=RESOLVE_FRACTIONS.get(str(dtype), RESOLVE_FRACTION),
        dtype=str(dtype),
    )


def comparable(analytic, numeric) -> np.ndarray:
    """Where both sides are finite: the only values any verdict compares."""
    return np.isfinite(analytic) & np.isfinite(numeric)


def allowed_error(analytic, numeric, fd_error, tol: Tolerance):
    magnitude = np.maximum(np.abs(analytic), np.abs(numeric))
    return tol.atol + tol.rtol * magnitude + FD_SAFETY * fd_error


def outside(analytic, numeric, allowed) -> np.ndarray:
    """Failing values: not comparable, or farther apart than ``allowed``."""
    with np.errstate(invalid="ignore"):
        return ~comparable(analytic, numeric) | (np.abs(analytic - numeric) > allowed)


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
    bad = outside(a, numeric, allowed)
    pair = _pair(input_name, output_name, "full", a, numeric, diff, fd_error, bad, allowed)
    pair.failing = failing_elements(a, numeric, diff, fd_error, bad, allowed, output_shape, input_shape)
    pair.worst = worst_element(a, numeric, diff, fd_error, output_shape, input_shape, allowed)
    return _verdict(pair, a, numeric, fd_error, disconnected, tol)


def projection_scale(u_squares, v_squares, ju_squares, jtv_squares, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The rtol scale F = ||J||_F and the analytic round-off of each probe
    (module docstring), from each probe's squared norms (``squared_norms``):
    |u|^2, |v|^2, |J u|^2 and |J^T v|^2. Both estimates of ||J||_F^2 (mean
    |J u|^2, mean |J^T v|^2) are unbiased; the larger is taken. Norms, not
    the vectors: a check that streams its probes over a model of 100M
    elements (``JointCheck``) keeps a probe's sums, never its directions."""
    estimates = [np.mean(w) for w in (ju_squares, jtv_squares)]
    finite = [e for e in estimates if np.isfinite(e)]  # a NaN side is caught by ``comparable``
    frob = np.sqrt(max(finite)) if finite else 0.0
    scale = np.full(len(u_squares), frob)
    eps = machine_eps(dtype)  # bfloat16 too, which numpy's finfo does not know
    roundoff = ANALYTIC_ULPS * eps * np.sqrt(u_squares) * np.sqrt(v_squares) * frob
    return scale, roundoff


def squared_norms(w) -> np.ndarray:
    """|w_p|^2 of each probe p of ``w`` (``[probes, ...]``, or a list of one
    array per probe)."""
    return row_dots(w, w)


def row_dots(a, b) -> np.ndarray:
    """<a_p, b_p> of each probe p of ``a`` and ``b`` (``[probes, ...]`` arrays,
    or lists of one array per probe), never forming their product: in float64
    one BLAS dot per probe, where the product and sum of a transformer
    layer's 3 x 7M-element probes made and faulted in a 170 MB array per
    input (3.8 s of a BERT-base's layer pass). Other dtypes keep the summed
    product, its pairwise sum in the rows' own dtype."""
    rows = [(np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)) for x, y in zip(a, b)]
    return np.array([
        np.dot(x, y) if x.dtype == y.dtype == np.float64 else np.sum(x * y)
        for x, y in rows
    ])


def projection_allowed(fd_error, scale, tol: Tolerance, roundoff=0.0, norms=1.0):
    """allowed_p of the module docstring: rtol applies to ``scale`` (F), atol to
    ``norms`` = |u| |v| per probe; ``roundoff`` is the analytic side's."""
    return tol.atol * norms + tol.rtol * scale + FD_SAFETY * fd_error + roundoff


def compare_projections(
    input_name: str,
    output_name: str,
    reverse: np.ndarray | None,
    forward: np.ndarray | None,
    numeric: np.ndarray,
    fd_error: np.ndarray,
    scale: np.ndarray,
    tol: Tolerance,
    roundoff: np.ndarray | float = 0.0,
    norms: np.ndarray | float = 1.0,
    element_size: float | None = None,
) -> PairResult:
    """Compare probes v^T J u: ``reverse`` = <u, J^T v> (None if disconnected),
    ``forward`` = <v, J u> (forward mode; None when checked elsewhere),
    ``numeric`` = <v, (J u) by differences>.

    Projections can cancel, so rtol is applied to ``scale``, the typical size of
    v^T J u rather than this probe's: ``projection_scale`` gives it, the analytic
    ``roundoff`` and the rule (module docstring); ``norms`` = |u| |v| carries
    atol to a projection. Callers with no better scale pass the Cauchy-Schwarz
    bound max(|v| |J u|, |u| |J^T v|), which is never below |v^T J u|.
    With ``element_size`` (the RMS Jacobian element) the pair states its power.
    """
    disconnected = reverse is None
    rev = np.zeros_like(numeric) if disconnected else reverse
    fwd = numeric if forward is None else forward
    allowed = projection_allowed(fd_error, scale, tol, roundoff, norms)
    reverse_bad = outside(rev, numeric, allowed)
    forward_bad = outside(fwd, numeric, allowed)
    diff = np.maximum(np.abs(rev - numeric), np.abs(fwd - numeric))
    bad = reverse_bad | forward_bad
    pair = _pair(input_name, output_name, "fast", rev, numeric, diff, fd_error, bad, allowed)
    # Relative to the projection's own scale: projections cancel.
    pair.max_rel_error = float(np.max(diff / np.maximum(scale, np.finfo(float).tiny), initial=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bad & ~comparable(rev, numeric), np.inf, diff / allowed)
    order = np.argsort(-ratio)
    pair.failing = [
        _element([], [int(p)], rev[p], numeric[p], diff[p], fd_error[p], scale[p])
        for p in order if bad[p]
    ][:MAX_FAILING]
    if len(order):  # the worst probe by error / allowed, as the failing ones are listed
        p = int(order[0])
        pair.worst = _element([], [p], rev[p], numeric[p], diff[p], fd_error[p], scale[p])
        both = comparable(rev, numeric) & comparable(fwd, numeric)
        pair.max_abs_error = float(diff[int(np.argmax(_severity(diff, both)))])  # NaN stays NaN, as in _pair
    pair.reverse_failed = bool(reverse_bad.any())
    if element_size is not None and len(allowed):
        pair.power = detectable_error(float(np.max(allowed)), len(allowed), element_size)
    pair = _verdict(pair, rev, numeric, fd_error, disconnected, tol, scale=scale)
    if pair.verdict == MISMATCH and comparable(fwd, numeric).all() and comparable(rev, numeric).all():
        # Forward mode is named only where it was compared here; taken elsewhere,
        # its agreement is said there (``mark_forward_agreement``).
        pair.explanation = (REVERSE_DISAGREES if forward is None
                            else _mode_explanation(pair.reverse_failed, bool(forward_bad.any())))
    return pair


def detectable_error(allowed: float, probes: int, element_size: float) -> Power:
    """The smallest single-element error fast mode sees with DETECT_PROBABILITY
    (module docstring), absolute and relative to an element of ``element_size``."""
    absolute = float(allowed) / product_quantile(probes)
    relative = absolute / element_size if element_size > 0 else float("inf")
    return Power(
        absolute=absolute, relative=relative, element_size=float(element_size),
        probability=DETECT_PROBABILITY, probes=probes,
    )


@lru_cache(maxsize=16)
def product_quantile(probes: int) -> float:
    """q with P(|Z1 Z2| < q)**probes = 1 - DETECT_PROBABILITY, Z1, Z2 independent
    standard normals. P(|Z1 Z2| < q) = E_z[erf(q / (|z| sqrt 2))], integrated
    over z = exp(s) on a grid of s (smooth in s, also near z = 0, where small q
    put all the weight; below s = -40 the weight, proportional to z, is under
    1e-17), solved by Newton's method on that sum, kept inside a bisection
    bracket. A dozen sums of 4,001 erf values: a first fast check paid 0.2 s
    for the 60 bisection steps on 20,001 points this replaced."""
    s = np.linspace(-40.0, 3.0, 4001)
    z = np.exp(s)
    weight = 2.0 * np.exp(-0.5 * z**2) / np.sqrt(2.0 * np.pi) * z * (s[1] - s[0])
    erf = np.vectorize(math.erf)
    target = (1.0 - DETECT_PROBABILITY) ** (1.0 / probes)
    scale = z * np.sqrt(2.0)
    lo, hi, q = 0.0, 10.0, 1.0
    for _ in range(100):
        below = float(np.sum(weight * erf(q / scale))) - target
        if abs(below) < 1e-13:
            break
        lo, hi = (q, hi) if below < 0 else (lo, q)
        slope = float(np.sum(weight * 2.0 / np.sqrt(np.pi) * np.exp(-((q / scale) ** 2)) / scale))
        step = q - below / slope if slope > 0 else None
        q = step if step is not None and lo < step < hi else 0.5 * (lo + hi)
    return q


#: A projection's mismatch where only reverse mode was compared.
REVERSE_DISAGREES = "reverse mode (the gradient) disagrees with finite differences"


def mark_forward_agreement(pair: PairResult, along: str) -> None:
    """A mismatch of reverse mode's projections (``REVERSE_DISAGREES``) whose
    forward mode was then taken and agrees with finite differences (``along``:
    on which probes) says so: where the bug is not (a custom gradient whose
    forward mode runs through its forward ops). Said only once it is known."""
    if pair.verdict == MISMATCH and pair.explanation == REVERSE_DISAGREES:
        pair.explanation = f"{REVERSE_DISAGREES}; forward mode agrees ({along})"


def _mode_explanation(reverse_failed: bool, forward_failed: bool) -> str:
    return {
        (True, False): f"{REVERSE_DISAGREES}; forward mode agrees",
        (False, True): "forward mode (ForwardAccumulator) disagrees with finite differences; reverse mode agrees",
        (True, True): "reverse and forward mode both disagree with finite differences",
    }[(reverse_failed, forward_failed)]


def forward_mismatch(forward, numeric, fd_error, scale, tol: Tolerance, roundoff=0.0, norms=1.0) -> np.ndarray:
    """Which probes' forward-mode projections disagree with the numeric ones (same rule)."""
    return outside(forward, numeric, projection_allowed(fd_error, scale, tol, roundoff, norms))


def forward_wrong(forward, numeric, reverse, fd_error, scale, tol: Tolerance, roundoff=0.0, norms=1.0) -> np.ndarray:
    """Probes where forward mode is wrong: outside tolerance of finite
    differences (``forward_mismatch``) and of reverse mode (the same rule with
    no finite-difference term: both sides are analytic). A NaN or Inf forward
    projection is always wrong, whatever the other sides say."""
    against_reverse = outside(forward, reverse, projection_allowed(0.0, scale, tol, 2 * roundoff, norms))
    with np.errstate(invalid="ignore"):
        not_finite = ~np.isfinite(forward)
    return not_finite | (forward_mismatch(forward, numeric, fd_error, scale, tol, roundoff, norms) & against_reverse)


def apply_fail_on(pairs: list[PairResult], fail_on) -> None:
    """Pairs whose verdict is listed in ``fail_on`` fail, whatever the default
    rule decided (``results.FAIL_ON_WORDS``): the one place a user's choice
    overrides a verdict's pass."""
    for pair in pairs:
        if pair.verdict in fail_on and not pair.failed:
            pair.failed = True
            pair.explanation += f" (fails: fail_on lists {pair.verdict})"


def mark_forward_failure(pair: PairResult, probe: int, forward: float, numeric: float, how: str = "") -> None:
    """A pair whose output failed the joint forward-mode probes fails too, and
    says how (``how``: the way forward mode was taken, when it is not the
    model's call as it is)."""
    if pair.failed and pair.verdict not in (MISMATCH, PASS, ZERO):
        return  # a more specific verdict (disconnected, inconclusive...) stands
    pair.explanation = _mode_explanation(pair.failed, True) + (
        f" (random tangent and cotangent, probe {probe}{', ' + how if how else ''}: forward mode gives {forward:.10g}, "
        f"finite differences {numeric:.10g}, and reverse mode disagrees with forward mode)"
    )
    pair.reverse_failed = pair.failed  # what reverse mode's own comparison found
    pair.forward_probe = (forward, numeric)
    pair.verdict, pair.failed = MISMATCH, True


def cotangent_failure(analytic, combined, magnitude, tol: Tolerance):
    """The cotangent rule: reverse mode's J^T c for a random cotangent c
    against c^T J, the unit-cotangent rows (which agreed with finite
    differences) combined by c, element by element of the input.

    The full check's Jacobian rows come from unit cotangents, and a scalar
    output's only row from the cotangent 1: a gradient function that ignores
    its upstream gradient (``def grad(dy): return 2 * x``) or scales it wrongly
    is right for exactly those seeds. Backpropagation is linear in the
    cotangent, so J^T c must equal c^T J up to round-off; c is a standard
    normal draw (the proof's) and -2c, so such a function is off by a factor
    the draw keeps away from 1. The allowed error is the element rule's
    (``allowed_error``, no finite-difference term: both sides are analytic)
    with the magnitude of the terms summed, |c|^T |J| (round-off is relative
    to them, not to their sum). Returns ``(index, analytic, combined)`` of the
    worst element outside it, or None.
    """
    allowed = allowed_error(np.maximum(np.abs(analytic), magnitude), combined, 0.0, tol)
    bad = outside(analytic, combined, allowed)
    if not np.any(bad):
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(comparable(analytic, combined), np.abs(analytic - combined) / allowed, np.inf)
    worst = int(np.argmax(np.nan_to_num(ratio, nan=0.0)))
    return worst, float(analytic[worst]), float(combined[worst])


def mark_cotangent_failure(pair: PairResult, element: str, analytic: float, numeric: float) -> None:
    """A pair whose unit-cotangent rows agree but whose random-cotangent product
    does not (``cotangent_failure``) fails as a mismatch, naming the rule."""
    pair.explanation = (
        "the gradient is not linear in its upstream gradient (cotangent rule): the rows taken with "
        f"unit cotangents agree with finite differences, but for a random cotangent c reverse mode's "
        f"J^T c gives {analytic:.10g} at {element}, those rows combined by c (c^T J) {numeric:.10g}: "
        "a gradient function that ignores or mis-scales its dy"
    )
    pair.verdict, pair.failed = MISMATCH, True


def mark_spread_failure(pair: PairResult, culprit, point: str) -> None:
    """A pair that agrees at the point, but on whose path a gradient the user
    wrote is wrong over the spread (``ModelGraph.spread_culprit``), fails."""
    pair.explanation = (
        f"a gradient the user wrote is wrong away from the point (spread rule): "
        f"{culprit.site.description} disagrees with finite differences at {point}, though the model "
        "agrees at its own point"
    )
    pair.culprit = culprit
    pair.verdict, pair.failed = MISMATCH, True


def _severity(diff, ok) -> np.ndarray:
    """abs error, with values that cannot be compared worst of all."""
    return np.where(ok, diff, np.inf)


def worst_element(a, n, diff, fd_error, output_shape, input_shape, allowed) -> Element | None:
    """The element of the largest ratio of error to allowed error (non-finite
    first): the order the failing elements are listed in, and the ratio that
    decides the verdict (an element fails when it exceeds 1). The row's "max
    abs err" is the largest abs error of the pair, which may be another element."""
    if not a.size:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(comparable(a, n), diff / allowed, np.inf)
    flat = int(np.argmax(np.nan_to_num(ratio, nan=0.0).ravel()))
    r, c = np.unravel_index(flat, a.shape)
    return _element(
        element_index(r, output_shape), element_index(c, input_shape), a[r, c], n[r, c], diff[r, c],
        fd_error[r, c], max(abs(a[r, c]), abs(n[r, c])),
    )


def _pair(input_name, output_name, mode, a, n, diff, fd_error, bad, allowed) -> PairResult:
    magnitude = np.maximum(np.abs(a), np.abs(n))
    ok = comparable(a, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=magnitude > 0)
    worst = np.argmax(_severity(diff, ok)) if diff.size else None
    return PairResult(
        input=input_name,
        output=output_name,
        verdict=PASS,
        failed=False,
        mode=mode,
        max_abs_error=0.0 if worst is None else float(diff.flat[worst]),
        max_rel_error=float(np.max(rel, initial=0.0)) if ok.all() else float("nan"),
        fd_error=float(np.max(fd_error, initial=0.0)),
        compared=int(diff.size),
        n_failing=int(bad.sum()),
    )


def _nonfinite(pair, a, n) -> bool:
    """Set the verdict of a pair with values that cannot be compared (module
    docstring): an analytic NaN/Inf where finite differences are finite is a
    mismatch; a numeric one leaves nothing to confirm: inconclusive."""
    analytic_bad = ~np.isfinite(a)
    numeric_bad = ~np.isfinite(n)
    if not (analytic_bad.any() or numeric_bad.any()):
        return False
    pair.failed = True
    if (analytic_bad & ~numeric_bad).any():
        count = int((analytic_bad & ~numeric_bad).sum())
        pair.verdict = MISMATCH
        pair.explanation = (
            f"the analytic derivative is not finite ({_kinds(a[analytic_bad & ~numeric_bad])}) at "
            f"{count} of {a.size} compared values where finite differences are finite"
        )
    else:
        pair.verdict = INCONCLUSIVE
        pair.explanation = (
            f"finite differences are not finite ({_kinds(n[numeric_bad])}) at "
            f"{int(numeric_bad.sum())} of {n.size} compared values: the function is not "
            "finite within a step of the point, so nothing can be confirmed"
        )
    return True


def _kinds(values) -> str:
    return "/".join(k for k, f in (("nan", np.isnan), ("inf", np.isinf)) if f(values).any())


def _verdict(pair, a, n, fd_error, disconnected, tol, scale=None) -> PairResult:
    """Pick the verdict word for a compared pair (see ``results.EXPLANATIONS``)."""
    if _nonfinite(pair, a, n):
        return pair
    magnitude = np.maximum(np.abs(a), np.abs(n)) if scale is None else np.maximum(
        np.maximum(np.abs(a), np.abs(n)), scale
    )
    resolution = allowed_error(0.0, n, fd_error, tol)
    numeric_zero = bool(np.all(np.abs(n) <= resolution))
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
    if not np.any(a) and numeric_zero:
        # Before the mismatch test: an exact analytic zero with numeric values inside
        # their resolution is confirmed, whatever rtol says about noise of that size.
        pair.verdict, pair.failed, pair.n_failing, pair.failing = ZERO, False, 0, []
        pair.resolution = float(np.max(resolution, initial=0.0))
        pair.explanation = (
            f"{EXPLANATIONS[ZERO]} (analytic exactly 0; numeric within its resolution "
            f"{pair.resolution:.3g}, up to {np.abs(n).max(initial=0.0):.3g})"
        )
        pair.warnings.append(
            f"the gradient of {pair.output} with respect to {pair.input} is zero (exactly 0 "
            f"analytically; numeric within its resolution {pair.resolution:.3g})"
        )
        return pair
    if pair.n_failing:
        pair.verdict, pair.failed = MISMATCH, True
        pair.explanation = EXPLANATIONS[MISMATCH]
        return pair
    # Elements confirmed as exact zeros (the zero rule) say nothing about resolution.
    significant = (magnitude > tol.atol) & ~((a == 0) & (np.abs(n) <= resolution))
    if np.any(significant) and np.max(FD_SAFETY * fd_error[significant]) > tol.resolve * np.max(
        magnitude[significant]
    ):
        pair.verdict, pair.failed = INCONCLUSIVE, True
        pair.explanation = (
            f"{EXPLANATIONS[INCONCLUSIVE]} (error estimate {pair.fd_error:.3g} against "
            f"derivatives of size {np.max(magnitude):.3g}); {inconclusive_advice(tol)}"
        )
        return pair
    pair.explanation = EXPLANATIONS[PASS]
    return pair


def inconclusive_advice(tol: Tolerance) -> str:
    """What an ``inconclusive`` pair says to do: check in float64, unless the
    tolerance is float64's already, where the noise is the output's own
    round-off at the point (large values beside the small changes a step
    makes), which no other dtype of this check resolves."""
    if tol.dtype in ("float64", "complex128"):
        return ("the check computes in float64 already: the output's round-off at this point (large values "
                "beside the changes a step makes) swamps the differences")
    return "check in float64"


def failing_elements(a, n, diff, fd_error, mask, allowed, output_shape, input_shape, limit=MAX_FAILING):
    """The elements of ``mask`` (at most ``limit``), worst first by their
    distance over ``allowed`` (a value that is not comparable is worst)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(mask, np.where(comparable(a, n), diff / allowed, np.inf), -np.inf).ravel()
    count = min(limit, int(np.count_nonzero(mask)))
    if count == 0:
        return []
    top = np.argpartition(-ratio, count - 1)[:count]
    top = top[np.argsort(-ratio[top])]
    rows, cols = np.unravel_index(top, a.shape)
    return [
        _element(
            element_index(r, output_shape), element_index(c, input_shape), a[r, c], n[r, c], diff[r, c],
            fd_error[r, c], max(abs(a[r, c]), abs(n[r, c])),
        )
        for r, c in zip(rows, cols)
    ]


def element_index(flat: int, shape: tuple) -> list[int]:
    """The index in ``shape`` of flat position ``flat`` ([] for a scalar)."""
    return [int(i) for i in np.unravel_index(int(flat), shape)] if shape else []


def _element(out_index, in_index, a, n, diff, fd_error, magnitude) -> Element:
    with np.errstate(invalid="ignore"):
        rel = float(diff / magnitude) if magnitude > 0 else (0.0 if diff == 0 else float("nan"))
    return Element(
        output_index=out_index,
        input_index=in_index,
        analytic=float(a),
        numeric=float(n),
        abs_error=float(diff),
        rel_error=rel,
        fd_error=float(fd_error),
    )


def wrong_shape(input_name: str, output_name: str, mode: str, expected: tuple, got: tuple) -> PairResult:
    """The pair of an input whose gradient has the wrong shape (shape rule)."""
    def shape(t):
        return "(" + ", ".join(str(d) for d in t) + ("," if len(t) == 1 else "") + ")"

    return PairResult(
        input=input_name, output=output_name, verdict=MISMATCH, failed=True, mode=mode,
        max_abs_error=math.inf, max_rel_error=math.inf, fd_error=0.0, compared=0,
        explanation=(
            f"the gradient of {output_name} with respect to {input_name} has shape "
            f"{shape(got)}, but {input_name} has shape {shape(expected)}: a gradient function "
            "returned the wrong shape (backpropagation would broadcast it or fail)"
        ),
    )
