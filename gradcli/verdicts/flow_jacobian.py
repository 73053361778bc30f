"""A flow's autodiff Jacobian on its own evidence, and the log-det judged against a Jacobian that has it.

``gradcli logdet`` compares a flow's declared log|det dy/dx| with slogdet of
its Jacobian. The autodiff Jacobian is only as right as the gradients inside
the flow: a wrong ``tf.custom_gradient`` (or registered gradient) on the
forward path makes it wrong, and its slogdet with it, while the declared value
may be right. So the Jacobian is first checked against central differences of
the flow itself, taken by the one engine every numeric derivative goes through
(``numerics.finite_diff``: its step rule, Richardson step and error estimate).

Directions rule (``agreement``): ``DIRECTIONS`` random standard-normal
directions v of the whole batch. One direction moves every example at once,
and the map is per example (``analyses.logdet`` checks that the autodiff
Jacobian does not mix them), so the quotient D along v holds each example's
J_b v_b: 4 evaluations of the batch per direction, whatever its size. Each
element i of the autodiff product (J_b v_b)_i is compared with D_i by
``compare``'s rule plus the analytic side's round-off:

    |(J v)_i - D_i| <= atol + rtol * max(|(J v)_i|, |D_i|) + FD_SAFETY * fd_error_i
                       + ANALYTIC_ULPS * eps * sum_j |J_ij| |v_j|

(``compare.allowed_error``, ``compare.ANALYTIC_ULPS``; eps of the dtype the
flow computes in). An example every element of which passes has an autodiff
Jacobian the differences agree with (``agrees``); one element outside, or a
NaN or Inf on either side, makes it ``wrong``. A generic direction sees any
error of J_b (J_b v = J'_b v holds only on a subspace of measure zero);
several give a margin against one nearly orthogonal to the error. An example
that passes while its quotients' error estimates exceed ``Tolerance.resolve``
of their size (the check's ``inconclusive`` rule) is ``unresolved``: the
differences could not have seen an error there, and the autodiff Jacobian is
used, as before it was checked.

Judging rule (``judge``): where the autodiff Jacobian agrees or is
unresolved, the declared value is compared with its slogdet by ``compare``'s
rule, |declared - log|det J|| <= atol + rtol * max(|declared|, |log|det J||);
a non-finite value on either side never passes. Where it is wrong, the log-det
is never blamed for it: the declared value is compared with slogdet of the
example's central-difference Jacobian (its n columns, one unit direction
each), by the same rule widened by what that Jacobian's error estimate E can
move log|det J|: to first order |tr(J^-1 E)| <= ||J^-1||_F ||E||_F, times
FD_SAFETY. When that bound exceeds ``Tolerance.resolve`` (0.1, 0.4 for
bfloat16: |det J| uncertain by about a tenth), or the Jacobian is singular or not
finite, the log-det at that example is ``not judged``.

Blame (``jacobian_findings``, ``log_det_findings``): an autodiff Jacobian the differences refute fails the
report and is worded as a wrong gradient inside the flow, never as a wrong
log-det (``analyses.logdet`` then names the gradient's line with the
culprit search of ``check``, ``ModelGraph.culprit``). A log-det that disagrees
with a Jacobian the differences vouch for is the wrong side: the report names
the code computing the declared value (``log_det_site``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.results import GraphSite, LogdetExample
from gradcli.results.logdet import (
    Consistency, JACOBIAN_AGREES, JACOBIAN_UNRESOLVED, JACOBIAN_WRONG, LOGDET_MISMATCH, LOGDET_NOT_JUDGED, LOGDET_PASS,
)
from gradcli.verdicts.compare import ANALYTIC_ULPS, FD_SAFETY, allowed_error, comparable, outside
from gradcli.verdicts.graph_ops import enclosing_class, enclosing_def
from gradcli.verdicts.phrases import count

#: Random directions the autodiff Jacobian is checked along: each costs 4
#: evaluations of the whole batch (two central differences, for Richardson).
#: One generic direction already sees any error of J_b; three make a miss by a
#: direction nearly orthogonal to the error's rows improbable, for 12 calls.
DIRECTIONS = 3
#: How many example numbers a finding lists.
LISTED = 10


@dataclass
class Agreement:
    """Per example: ``JACOBIAN_AGREES``, ``JACOBIAN_WRONG`` or
    ``JACOBIAN_UNRESOLVED`` (``status``), and the largest relative
    disagreement of J v over the directions, |Jv - D| / max(|Jv|, |D|) by
    vector norms (``rel_error``; inf where a side is not finite)."""

    status: list[str]
    rel_error: np.ndarray


def analytic_roundoff(jacobians: np.ndarray, directions: np.ndarray, eps: float) -> np.ndarray:
    """ANALYTIC_ULPS * eps * sum_j |J_ij| |v_j| per example and direction
    (``jacobians`` ``[B, n, n]``, ``directions`` ``[k, B, n]``): the round-off
    of the autodiff product J v (module docstring)."""
    return ANALYTIC_ULPS * eps * np.einsum("bij,kbj->kbi", np.abs(jacobians), np.abs(directions))


def agreement(analytic, numeric, fd_error, roundoff, tol) -> Agreement:
    """The directions rule (module docstring) on ``[k, B, n]`` arrays: the
    autodiff products J v, their central differences, the differences' error
    estimates and the products' round-off."""
    with np.errstate(invalid="ignore", over="ignore"):
        allowed = allowed_error(analytic, numeric, fd_error, tol) + roundoff
        bad = outside(analytic, numeric, allowed).any(axis=(0, 2))
        size = np.maximum(np.linalg.norm(analytic, axis=2), np.linalg.norm(numeric, axis=2))
        diff = np.linalg.norm(analytic - numeric, axis=2)
        rel = np.where(comparable(analytic, numeric).all(axis=2),
                       diff / np.maximum(size, np.finfo(float).tiny), np.inf).max(axis=0)
        noisy = (np.linalg.norm(fd_error, axis=2) > tol.resolve * np.linalg.norm(numeric, axis=2)).any(axis=0)
    status = [JACOBIAN_WRONG if b else JACOBIAN_UNRESOLVED if n else JACOBIAN_AGREES for b, n in zip(bad, noisy)]
    return Agreement(status=status, rel_error=rel)


def _within(declared: float, logabsdet: float, widen: float, tol) -> tuple[bool, float]:
    """``compare``'s rule for a log-det, widened by ``widen``: (passes, |error|)."""
    error = abs(declared - logabsdet)
    if not (np.isfinite(declared) and np.isfinite(logabsdet)):
        return False, error
    return bool(error <= tol.atol + tol.rtol * max(abs(declared), abs(logabsdet)) + widen), error


def judge(declared, sign, logabsdet, found: Agreement, differenced: dict, tol) -> list[LogdetExample]:
    """Each example's verdict by the judging rule (module docstring).
    ``sign``, ``logabsdet``: slogdet of the autodiff Jacobians;
    ``differenced``: example -> (central-difference Jacobian ``[n, n]``, its
    error estimate), for the examples whose autodiff Jacobian is wrong."""
    examples = []
    for b, status in enumerate(found.status):
        example = LogdetExample(
            index=b, declared=float(declared[b]), logabsdet=float(logabsdet[b]), sign=float(sign[b]),
            abs_error=float(abs(declared[b] - logabsdet[b])), ok=None, jacobian=status,
            jacobian_rel_error=float(found.rel_error[b]), autodiff_logabsdet=float(logabsdet[b]),
        )
        if status != JACOBIAN_WRONG:
            example.ok, _ = _within(example.declared, example.logabsdet, 0.0, tol)
        else:
            _against_differences(example, *differenced[b], tol)
        example.verdict = {True: LOGDET_PASS, False: LOGDET_MISMATCH, None: LOGDET_NOT_JUDGED}[example.ok]
        examples.append(example)
    return examples


def _against_differences(example: LogdetExample, jacobian, error, tol) -> None:
    """The declared value against slogdet of the central-difference Jacobian,
    widened by FD_SAFETY ||J^-1||_F ||E||_F; not judged past ``tol.resolve``."""
    with np.errstate(all="ignore"):
        sign, logabsdet = np.linalg.slogdet(jacobian) if np.isfinite(jacobian).all() else (0.0, np.nan)
        try:
            bound = FD_SAFETY * np.linalg.norm(np.linalg.inv(jacobian)) * np.linalg.norm(error)
        except np.linalg.LinAlgError:
            bound = np.inf
    example.sign, example.logabsdet = float(sign), float(logabsdet)
    example.abs_error = float(abs(example.declared - logabsdet))
    if sign == 0 or not np.isfinite(logabsdet) or not bound <= tol.resolve:
        example.against, example.logabsdet, example.abs_error = "", float("nan"), float("nan")
        return
    example.against = "finite differences"
    example.ok, example.abs_error = _within(example.declared, float(logabsdet), float(bound), tol)


def _listed(indices) -> str:
    more = f" and {len(indices) - LISTED} more" if len(indices) > LISTED else ""
    return ", ".join(map(str, indices[:LISTED])) + more


def jacobian_findings(examples: list[LogdetExample], batch: int, declared_name: str, directions: int) -> list[str]:
    """What the report says of the autodiff Jacobian (``examples``: every
    example, in order); a line that fails the report starts with ``FAIL``."""
    wrong = [e for e in examples if e.jacobian == JACOBIAN_WRONG]
    confirmed = [e for e in examples if e.jacobian == JACOBIAN_AGREES]
    unresolved = [e.index for e in examples if e.jacobian == JACOBIAN_UNRESOLVED]
    along = f"along {count(directions, 'random direction')}"
    lines = []
    if wrong:
        worst = max(wrong, key=lambda e: np.nan_to_num(e.jacobian_rel_error, nan=np.inf))
        lines.append(
            f"FAIL the autodiff Jacobian is wrong at {len(wrong)} of {batch} examples "
            f"({_listed([e.index for e in wrong])}): central differences of the flow {along} disagree "
            f"with it (worst rel err {_fmt(worst.jacobian_rel_error)} at example {worst.index}); a gradient "
            f"inside the flow is wrong, not {declared_name}"
        )
    elif confirmed:
        worst = max(confirmed, key=lambda e: e.jacobian_rel_error)
        where = f"all {batch} examples" if len(confirmed) == batch else f"{len(confirmed)} of {batch} examples"
        lines.append(
            f"the autodiff Jacobian agrees with central differences of the flow {along} at {where} "
            f"(worst rel err {_fmt(worst.jacobian_rel_error)} at example {worst.index})"
        )
    if unresolved:
        lines.append(
            f"central differences are too noisy to confirm the autodiff Jacobian at examples "
            f"{_listed(unresolved)}: its slogdet is used there unconfirmed"
        )
    return lines


def log_det_findings(examples: list[LogdetExample], batch: int, declared_name: str) -> list[str]:
    """What the report says of the declared log-det, as ``jacobian_findings``."""
    judged = [e for e in examples if e.ok is not None]
    failing = [e for e in judged if not e.ok]
    skipped = [e.index for e in examples if e.ok is None]
    differenced = [e.index for e in judged if e.against == "finite differences"]
    lines = []
    used = (f"; at examples {_listed(differenced)} that is the central-difference Jacobian, the autodiff "
            "one being wrong there") if differenced else ""
    ranked = sorted(judged, key=lambda e: -np.nan_to_num(e.abs_error, nan=np.inf))
    if judged and not failing:
        where = f"all {batch} examples" if len(judged) == batch else f"{len(judged)} of {batch} examples"
        lines.append(f"{declared_name} agrees with slogdet of the Jacobian at {where} "
                      f"(worst abs err {_fmt(ranked[0].abs_error)} at example {ranked[0].index}){used}")
    elif judged:
        worst = ranked[0]
        lines.append(
            f"FAIL {declared_name} disagrees at {len(failing)} of {batch} examples; worst: "
            f"example {worst.index}, declared {worst.declared:.10g}, slogdet {worst.logabsdet:.10g} "
            f"(abs err {_fmt(worst.abs_error)}){used}"
        )
    if skipped:
        lines.append(
            f"{declared_name} is not judged at examples {_listed(skipped)}: the autodiff Jacobian is wrong "
            "there and the central-difference one is singular, not finite or too uncertain"
        )
    return lines


def _fmt(value: float) -> str:
    return f"{value:.3g}" if value != 0 else "0"


def log_det_site(graph, output: str) -> tuple[GraphSite, str] | None:
    """The code that computes the declared log-det, output ``output`` of the
    traced ``graph`` (a ``graph.TracedGraph``): walking back from the output
    through the ops that compute it (breadth first, each op's inputs in
    order), the first op a line of the user's code made itself
    (``TracedGraph.made_at``: a bijector's ``_forward_log_det_jacobian``,
    not the framework's sum after it), else the first op with a line at all
    (``TracedGraph.location``: the user's call of the library that made it).
    Its description names the method around that line
    (``Class._forward_log_det_jacobian``); the second item is the
    ``file:line`` of the ``def`` of the function around it. None when no op
    on the way has a line (or there is no graph)."""
    if not graph.trace():
        return None
    order, queue, seen = [], [graph.outputs[output].op], set()
    while queue:
        op = queue.pop(0)
        if op not in seen:
            seen.add(op)
            order.append(op)
            queue.extend(t.op for t in op.inputs)
    found = next(((op, at) for op in order if (at := graph.made_at(op))), None)
    found = found or next(((op, at) for op in order if (at := graph.location(op))), None)
    if found is None:
        return None
    op, location = found
    path, line = location.rsplit(":", 1)
    method = enclosing_class(path, int(line))
    description = graph.describe_op(op)  # names a method of a class in the model file itself
    if method and method not in description:
        description += f" in {method}"
    site = graph.site(op, description)
    site.location = location
    defined = enclosing_def(path, int(line))
    return site, f"{path}:{defined}" if defined else ""


def consistency(identity: str, a, b, tol, scale=None) -> Consistency:
    """The worst example of ``a`` = ``b`` (per example) by the rule of ``analyses.logdet.check_bijector``:
    |a - b| <= atol + rtol * max(|a|, |b|) (or ``scale``); NaN or Inf never agrees."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    errors = np.abs(a - b)
    scale = np.maximum(np.abs(a), np.abs(b)) if scale is None else scale
    allowed = tol.atol + tol.rtol * scale
    with np.errstate(invalid="ignore"):
        failing = ~(np.isfinite(errors) & (errors <= allowed))
    worst = int(np.argmax(np.where(np.isfinite(errors), errors, np.inf)))
    return Consistency(
        identity=identity, n_failing=int(failing.sum()), worst_example=worst,
        worst_error=float(errors[worst]), allowed=float(allowed[worst]),
    )
