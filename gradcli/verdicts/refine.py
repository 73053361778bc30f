"""``refine``: re-examine the failing elements of a pair and reclassify them.

A central difference that disagrees with the analytic derivative is not always a
bug. ``refine`` re-examines the failing elements of a pair with one-sided
difference quotients on a ladder of steps (``ladder``) and reclassifies them,
stage by stage: pick the columns (``_select_columns``), run their ladders
(``ladder.examine_columns``), sort the elements into what each rule finds
(``_classify``: ``kink``, ``surrogate`` and the rules below), record the
evidence on the pair (``_record``), and let one verdict win (``_decide``,
applied by ``diagnosis.apply``). An excuse is earned only with evidence from
the traced graph (``excuses``); the finite differences alone never excuse a
failure.

* elements whose slopes do not settle (error estimate, times ``FD_SAFETY``,
  over ``atol`` + ``Tolerance.resolve`` of the slope) are ``inconclusive``,
  unless the slopes agree with each other and the analytic value lies outside
  both of them by more than the element rule allows with their own error
  estimates: unsettled slopes still bound the derivative, so that is a
  ``mismatch`` (16-bit compute, whose one-sided slopes rarely settle to a
  tenth, against a gradient 2x off); so is an element the central difference
  refutes on its own: off by more than ``ladder.REFUTE_FACTOR`` times the
  element rule's allowance, both one-sided slopes nearer it than the
  analytic value (``ladder.central_refutes``: nothing shows the central
  difference fooled by a kink or a function too fast for its step).
* anything else stays ``mismatch``.

A mismatch whose input an op reads as a symmetric matrix (``tf.linalg.cholesky``)
is first compared along its symmetric directions (``symmetric``), and passes
when they agree. Precedence (``_decide``): any unexplained element makes the pair a
``mismatch``; else a kink that is no subgradient a failing ``kink``; else
unresolved elements ``inconclusive``; else ``surrogate``; else kinks and jumps
a passing ``kink``; else (every failing element resolved at smaller steps)
``pass``. A pass or zero pair whose kink suspects are no kink at the point
keeps its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.results import MISMATCH, PASS, ZERO, PairResult
from gradcli.verdicts import compare, diagnosis, kink, surrogate, symmetric
from gradcli.verdicts.diagnosis import Diagnosis
from gradcli.verdicts.evidence import PathEvidence
from gradcli.verdicts.kink import SCAN_COLUMNS, KinkFinding
from gradcli.verdicts.ladder import ColumnSlopes, central_refutes, examine_columns, outside_both
from gradcli.verdicts.surrogate import SurrogateFinding


@dataclass
class RefineJob:
    """``refine``'s parameters (see its docstring)."""

    pair: PairResult
    analytic: np.ndarray
    numeric: np.ndarray
    fd_error: np.ndarray
    fd: object
    f0: object
    x_shape: tuple
    y_shape: tuple
    tol: object
    allow_surrogate: bool = False
    graph: object = None
    suspects: np.ndarray | None = None
    others: object = None


@dataclass
class Columns:
    """The columns ``refine`` examines, worst first (``cols``), with the
    failing elements ``bad`` and the kink ``suspects`` (full blocks)."""

    bad: np.ndarray
    suspects: np.ndarray
    n_suspect_columns: int
    scanned_all: bool  # every suspect column examined (at most SCAN_COLUMNS are)
    cols: np.ndarray


@dataclass
class ElementClasses:
    """Every examined element sorted by the rules, each ``[output size, columns]``."""

    kinks: KinkFinding
    surrogates: SurrogateFinding
    resolved: np.ndarray  # both settled slopes agree with the analytic value at smaller steps
    unresolved: np.ndarray  # finite differences cannot resolve the derivative
    unexplained: np.ndarray  # no rule explains it: a mismatch


def refine(pair: PairResult, analytic, numeric, fd_error, fd, f0, x_shape, y_shape, tol,
           allow_surrogate=False, graph=None, suspects=None, others=None) -> PairResult:
    """Reclassify the failing elements of a ``mismatch`` pair, and look at the
    kink ``suspects`` of any pair (see module docstring).

    ``analytic``, ``numeric`` and ``fd_error`` are ``[output size, input size]``;
    ``fd`` the pair's ``FiniteDifferences`` (for ``evaluate``), ``f0`` the output
    at the point. ``graph`` (a ``culprit.ModelGraph``, or None) gives the
    evidence an excuse needs (``excuses``): a straight-through estimator for a
    ``surrogate``, a non-smooth op for a ``kink``; FakeQuant ops that the input
    reaches by several paths (``ModelGraph.surrogate_sites``) explain elements
    that are not locally constant themselves. ``suspects`` (``kink_suspects``)
    marks elements whose one-sided slopes at the default step disagree; of those
    that passed, at most SCAN_COLUMNS columns are examined on the ladder, and a
    kink is reported only where the ladder confirms it at the point.
    ``others`` (``tie_direction``): the analytic blocks of the other inputs,
    for ties across inputs.
    """
    return refine_job(RefineJob(pair, analytic, numeric, fd_error, fd, f0, x_shape, y_shape, tol,
                                allow_surrogate, graph, suspects, others))


def refine_job(job: RefineJob) -> PairResult:
    """``refine`` on its parameters gathered in ``job``."""
    pair = job.pair
    if pair.verdict == MISMATCH:  # compared along symmetric directions first (``symmetric``)
        symmetric_input = symmetric.symmetric_pass(pair, job.analytic, job.numeric, job.fd_error, job.y_shape,
                                                   job.tol, job.graph)
        if symmetric_input is not None:
            return diagnosis.apply(pair, symmetric_input)
    columns = _select_columns(job)
    if columns is None:
        return pair
    was_zero = pair.verdict == ZERO
    evidence = PathEvidence(job.graph, pair.input, pair.output)
    slopes = examine_columns(job.fd, pair, job.f0, job.analytic, columns.bad, columns.cols, job.tol, evidence)
    classes = _classify(job, columns, slopes, evidence)
    _record(job, columns, slopes, classes, evidence)
    diagnosis.apply(pair, _decide(job, columns, classes))
    if was_zero and pair.verdict != ZERO:
        _drop_zero_evidence(pair)
    return pair


def _drop_zero_evidence(pair: PairResult) -> None:
    """A zero pair refined into another verdict (a zero gradient at a kink is
    a kink too): the zero rule's resolution and its "is zero" warning no
    longer describe it."""
    pair.resolution = None
    pair.warnings = [w for w in pair.warnings if " is zero (" not in w]


def _select_columns(job: RefineJob) -> Columns | None:
    """The failing elements of a mismatch, or the kink suspects of a pass or
    zero pair, and their columns worst first; None when there is nothing to
    examine (the verdict stands)."""
    pair, a, n, tol = job.pair, job.analytic, job.numeric, job.tol
    if pair.verdict == MISMATCH:
        bad = compare.outside(a, n, compare.allowed_error(a, n, job.fd_error, tol))
    elif pair.verdict in (PASS, ZERO) and job.suspects is not None and job.suspects.any():
        bad = np.zeros(a.shape, dtype=bool)  # a zero gradient at a kink is a kink too
    else:
        return None
    suspects = np.zeros_like(bad) if job.suspects is None else job.suspects & ~bad
    suspect_cols = np.flatnonzero(suspects.any(axis=0))
    suspects[:, suspect_cols[SCAN_COLUMNS:]] = False
    cols = np.flatnonzero((bad | suspects).any(axis=0))
    if not len(cols):
        return None
    # Worst columns first; stop once a batch holds an element that is surely a
    # mismatch (the verdict is then mismatch whatever the rest are): a real bug
    # costs at most one batch of ladders. Columns not examined stay unexplained.
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bad, np.abs(a - n) / compare.allowed_error(a, n, job.fd_error, tol), 0.0)
    ratio = np.nan_to_num(ratio[:, cols], nan=np.inf).max(axis=0)
    cols = cols[np.argsort(-ratio, kind="stable")]
    return Columns(bad, suspects, len(suspect_cols), len(suspect_cols) <= SCAN_COLUMNS, cols)


def _classify(job: RefineJob, columns: Columns, slopes: ColumnSlopes, evidence) -> ElementClasses:
    """Sort the examined elements by the rules: kink (and jump, tie),
    resolved at smaller steps, refuted, unresolved, surrogate, unexplained."""
    pair, tol, cols = job.pair, job.tol, columns.cols
    sub_a = job.analytic[:, cols]
    sub_bad = columns.bad[:, cols]
    examined = sub_bad | columns.suspects[:, cols]
    k = kink.find_kinks(job.fd, pair, job.f0, job.analytic, cols, examined, slopes, tol, evidence, job.others)
    ran = slopes.ran[None, :]
    # Both settled slopes agree with the analytic value at smaller steps: a pass
    # at a better step (a kink inside the default stencil but not at the point,
    # or a function that varies too fast for the default step). A function
    # locally constant there agrees only with an analytic value within atol of
    # 0 (a relu input just below zero, within the step); one that is not is
    # the surrogate rule's to judge.
    locally_constant = sub_bad & slopes.constant & (np.abs(sub_a) > tol.atol)
    resolved = sub_bad & ~locally_constant & ~k.gap & ~k.jumped & k.settled & k.agrees
    # Slopes that do not settle still bound the derivative by their error
    # estimates: where they agree with each other and the analytic value lies
    # outside both bands, it is refuted however coarse the resolution (16-bit
    # compute, whose one-sided slopes rarely settle to a tenth, against a
    # gradient 2x off): a mismatch, not inconclusive.
    refuted = sub_bad & ran & ~locally_constant & ~k.gap & ~k.jumped & ~k.settled & outside_both(
        sub_a, slopes.left, slopes.right, slopes.left_err, slopes.right_err, tol
    )
    # Slopes that do not settle, or a gap with no non-smooth op that the analytic
    # value lies within: finite differences cannot resolve the derivative here,
    # unless the central difference refutes it on its own (far beyond its own
    # error estimate, the slopes siding with it: ``ladder.central_refutes``).
    unresolved = sub_bad & ran & ~locally_constant & ~k.is_kink & ~k.jumped & ~resolved & ~refuted & (
        ~k.settled | (k.gap & k.between)
    )
    central = unresolved & central_refutes(
        sub_a, job.numeric[:, cols], job.fd_error[:, cols], slopes.left, slopes.right, tol
    )
    refuted |= central
    unresolved &= ~central
    s = surrogate.find_surrogates(job.graph, pair, evidence, locally_constant, sub_a, cols, tol)
    unexplained = (sub_bad & ~s.surrogate & ~k.kink_ok & ~k.kink_bad & ~k.jumped & ~resolved
                   & ~unresolved & ~s.unshown)
    if s.surrogate.any() and (unexplained & ~s.unearned).any() and job.graph is not None:
        sites = surrogate.several_paths(job.graph, pair)
        if sites:
            pair.sites.extend(sites)
            pair.warnings.append(surrogate.several_paths_warning(pair, sites))
            s.surrogate |= unexplained & ~s.unearned
            unexplained &= s.unearned
    return ElementClasses(k, s, resolved, unresolved, unexplained)


def _record(job: RefineJob, columns: Columns, slopes: ColumnSlopes, classes: ElementClasses, evidence) -> None:
    """The evidence on the pair, whatever its verdict: kinks and jumps,
    surrogates, the kink scan's reach, elements resolved at smaller steps,
    and the elements that still fail."""
    pair, k, cols = job.pair, classes.kinks, columns.cols
    kinks = k.kink_ok | k.kink_bad | k.jumped
    pair.n_kinks = int(kinks.sum())
    n_jumps = int(k.jumped.sum())
    if n_jumps:
        pair.warnings.append(kink.jump_warning(n_jumps, k.nonsmooth))
    pair.n_surrogate = int(classes.surrogates.surrogate.sum())
    pair.kinks = kink.kink_records(kinks, k.kink_bad, slopes.left, slopes.right, job.analytic[:, cols], cols,
                                   job.y_shape, job.x_shape, k.tie_refused, k.jumped)
    if not columns.scanned_all:
        pair.warnings.append(kink.scan_warning(columns.n_suspect_columns))
    near = np.zeros(len(cols), dtype=bool) if slopes.near_gap is None else ~np.isnan(slopes.near_gap)
    near_resolved = classes.resolved & near[None, :]
    if near_resolved.any():
        at = near_resolved.any(axis=0)
        pair.warnings.append(kink.near_tie_warning(
            int(near_resolved.sum()), slopes.near_gap[at], slopes.step[at],
            int(near_resolved[:, slopes.one_side != 0].sum()), evidence.nonsmooth))
    if (classes.resolved & ~near[None, :]).any():
        pair.warnings.append(kink.resolved_warning(int((classes.resolved & ~near[None, :]).sum()),
                                                   evidence.nonsmooth))
    failing = _failing(classes)
    full_failing = np.zeros_like(columns.bad)
    full_failing[:, cols] = failing
    a, n, fd_error = job.analytic, job.numeric, job.fd_error
    diff = np.abs(a - n)
    allowed = compare.allowed_error(a, n, fd_error, job.tol)
    pair.failing = compare.failing_elements(a, n, diff, fd_error, full_failing, allowed, job.y_shape, job.x_shape)
    pair.n_failing = int(full_failing.sum())


def _failing(classes: ElementClasses) -> np.ndarray:
    """The elements that fail after refinement: unexplained, kinks that are
    no subgradient, unresolved, and surrogates the graph cannot show."""
    return classes.unexplained | classes.kinks.kink_bad | classes.unresolved | classes.surrogates.unshown


def _decide(job: RefineJob, columns: Columns, classes: ElementClasses) -> Diagnosis | None:
    """The one verdict, by the precedence of the module docstring; None when
    no suspect was a kink at the point (the verdict stands)."""
    pair, k, s = job.pair, classes.kinks, classes.surrogates
    if classes.unexplained.any():
        culprit = _culprit(job.graph, pair, job.tol) if s.unearned.any() else None
        return diagnosis.mismatch(int(s.unearned.sum()), s.why_unearned, culprit, pair.n_kinks, pair.n_surrogate)
    if k.kink_bad.any():
        return kink.failed_kink(int(k.kink_bad.sum()), int((k.kink_bad & ~k.between).sum()),
                                pair.n_tie_refused, k.nonsmooth)
    if (classes.unresolved | s.unshown).any():
        return diagnosis.inconclusive(int((classes.unresolved & k.gap).sum()),
                                      int((classes.unresolved & ~k.gap).sum()), int(s.unshown.sum()))
    if s.surrogate.any():
        return surrogate.surrogate_verdict(pair.n_surrogate, pair.n_kinks, s.constructions, job.allow_surrogate)
    if (k.kink_ok | k.kink_bad | k.jumped).any():
        n_jumps = int(k.jumped.sum())
        return kink.kinks_pass(pair.n_kinks - n_jumps, n_jumps, k.nonsmooth)
    if columns.bad.any():  # every failing element resolved at smaller steps
        return diagnosis.passed()
    return None


def _culprit(graph, pair, tol):
    """``ModelGraph.culprit`` for the pair, or None (graph analysis is a bonus here)."""
    if graph is None:
        return None
    try:
        return graph.culprit(pair.input, pair.output, tol)
    except Exception:
        return None
