"""Second derivatives checked against finite differences of the analytic gradient.

The scalar is f = <c, output> (``gradcli.analyses.objective``); its gradient blocks
``df/dx`` are treated as the outputs of a model function and differenced by the
same ``FiniteDifferences`` that first-order checks use, so the step rule,
Richardson extrapolation, error estimate and verdict rule (``gradcli.verdicts.compare``)
are those of ``gradcli check``. Analytic second derivatives are
Hessian-vector products two ways: forward-over-reverse and reverse-over-reverse.

* ``full``: every Hessian element. Numeric columns d(grad)/dx_j from
  ``along_axes``; analytic blocks from the dense forward-over-reverse and
  reverse-over-reverse Hessians, each compared element by element with the
  differences.
* ``fast``: ``probes`` projections v^T H u per (input, gradient block) pair, from
  reverse-over-reverse, forward-over-reverse and differences along u.

One rule decides a pair's verdict and its count of failing elements (or
probes): an element fails when either route is outside ``compare``'s tolerance
of the differences (in full mode the block compared is, element by element,
the route farther from the differences relative to its allowance). A failing
pair says which route agrees with finite differences (``verdicts.second_order.second_derivative_routes``), and names
the op or ``tf.custom_gradient`` whose gradient function's own derivative is
wrong (``ModelGraph.culprit`` with ``order=2``: each op's gradient, as a
function of the op's inputs for a fixed random cotangent, is differentiated
by TensorFlow and by differences).

A derivative that TensorFlow cannot see (a custom gradient using
``tf.stop_gradient`` on its input, say) gives a first derivative that passes and
a second derivative that differs from the differenced gradient: a mismatch here.
"""

from __future__ import annotations

import numpy as np

from gradcli.verdicts import compare, diagnosis, symmetric
from gradcli.verdicts.culprit import ModelGraph
from gradcli.verdicts.second_order import second_derivative_routes
from gradcli.numerics.finite_diff import FiniteDifferences
from gradcli.analyses.objective import Objective, choose_cotangents, gradient_name
from gradcli.results import MISMATCH, PairResult, Tolerance


def check_objective(
    objective: Objective, tol: Tolerance, mode: str, probes: int, rng,
    hessian: np.ndarray | None = None, function_name: str = "f",
) -> tuple[list[PairResult], int]:
    """Check the Hessian of ``objective`` at its point -> (pairs, function evaluations)."""
    model = objective.model
    outputs = [gradient_name(function_name, b.name) for b in objective.blocks]
    fd = FiniteDifferences(objective.gradient_outputs(function_name), model.point, outputs)
    if mode == "full":
        pairs = _full(objective, fd, outputs, tol, hessian)
    else:
        pairs = _fast(objective, fd, outputs, tol, probes, rng)
    return pairs, fd.evaluations


def _full(objective, fd, outputs, tol, hessian) -> list[PairResult]:
    theta = objective.theta0
    graph = None  # the model's traced graph, made once a pair needs it (the symmetric rule)
    H = objective.dense_hessian(theta) if hessian is None else hessian
    H_reverse = objective.dense_hessian(theta, "reverse")
    pairs = []
    for bj in objective.blocks:
        numeric = fd.along_axes(bj.name)
        for bi, out in zip(objective.blocks, outputs):
            # values[out]: [size_j, *shape_i] -> [size_i, size_j] = H[block i, block j]
            columns = numeric.values[out].reshape(bj.size, bi.size).T
            errors = numeric.errors[out].reshape(bj.size, bi.size).T
            rows = slice(bi.offset, bi.offset + bi.size)
            cols = slice(bj.offset, bj.offset + bj.size)
            forward, reverse = H[rows, cols], H_reverse[rows, cols]
            forward_bad = _outside(forward, columns, errors, tol)
            reverse_bad = _outside(reverse, columns, errors, tol)
            # One rule for verdict and count: per element, the route farther
            # from the differences (relative to its allowance) is compared.
            with np.errstate(invalid="ignore", divide="ignore"):
                worse = _severity(reverse, columns, errors, tol) > _severity(forward, columns, errors, tol)
            block = np.where(worse, reverse, forward)
            pair = compare.compare_block(
                bj.name, out, block, columns, errors, bi.shape, bj.shape, tol
            )
            if pair.verdict == MISMATCH:  # an input read as a symmetric matrix (``verdicts.symmetric``)
                graph = graph or ModelGraph(objective.model)
                diagnosis.apply(pair, symmetric.symmetric_pass(pair, [forward, reverse], columns, errors, bi.shape,
                                                               tol, graph, gradient_of=bi.name,
                                                               cotangents=objective.cotangents))
            second_derivative_routes(pair, int(forward_bad.sum()), int(reverse_bad.sum()), forward_bad.size, "elements")
            pairs.append(pair)
    return pairs


def _outside(analytic, numeric, errors, tol) -> np.ndarray:
    return compare.outside(analytic, numeric, compare.allowed_error(analytic, numeric, errors, tol))


def _severity(analytic, numeric, errors, tol) -> np.ndarray:
    """|analytic - numeric| over its allowance; infinite where not comparable."""
    allowed = compare.allowed_error(analytic, numeric, errors, tol)
    ratio = np.abs(analytic - numeric) / allowed
    return np.where(compare.comparable(analytic, numeric), ratio, np.inf)


def _fast(objective, fd, outputs, tol, probes, rng) -> list[PairResult]:
    theta = objective.theta0
    pairs = []
    for bj in objective.blocks:
        u = rng.standard_normal((probes,) + bj.shape).astype(objective.dtype)
        numeric = fd.along(bj.name, u)
        tangents = np.zeros((probes, objective.n), objective.dtype)
        tangents[:, bj.offset : bj.offset + bj.size] = u.reshape(probes, -1)
        forward = objective.hvps(theta, tangents, "forward")
        reverse = objective.hvps(theta, tangents, "reverse")
        for bi, out in zip(objective.blocks, outputs):
            v = rng.standard_normal((probes, bi.size))
            part = slice(bi.offset, bi.offset + bi.size)
            hu_numeric = numeric.values[out].reshape(probes, -1)
            flat_u = u.reshape(probes, -1)
            scale, roundoff = compare.projection_scale(
                compare.squared_norms(flat_u), compare.squared_norms(v), compare.squared_norms(hu_numeric),
                compare.squared_norms(forward[:, part]), objective.dtype,
            )
            rev_p, fwd_p = np.sum(v * reverse[:, part], axis=1), np.sum(v * forward[:, part], axis=1)
            num_p = np.sum(v * hu_numeric, axis=1)
            err_p = np.sum(np.abs(v) * numeric.errors[out].reshape(probes, -1), axis=1)
            norms = np.linalg.norm(flat_u, axis=1) * np.linalg.norm(v, axis=1)
            pair = compare.compare_projections(
                bj.name, out, rev_p, fwd_p, num_p, err_p, scale, tol, roundoff, norms,
                element_size=float(scale[0]) / np.sqrt(bi.size * bj.size),
            )
            allowed = compare.projection_allowed(err_p, scale, tol, roundoff, norms)
            second_derivative_routes(pair, int(compare.outside(fwd_p, num_p, allowed).sum()),
                    int(compare.outside(rev_p, num_p, allowed).sum()), probes, "probes")
            pairs.append(pair)
    return pairs


def check_second_order(model, outputs: list[str], tol: Tolerance, mode: str, options):
    """The hook of a check with ``order=2``: each floating output on its own,
    as f = <c, output> (c = 1 for a scalar output, else a seeded standard normal).
    Returns (pairs, evaluations, notes)."""
    rng = np.random.default_rng([options.rng_seed, 2])
    pairs, evaluations, notes = [], 0, []
    for o in outputs:
        single = _single_output(model, o)
        cotangents, description = choose_cotangents(single, {}, rng)
        objective = Objective(single, cotangents)
        found, count = check_objective(
            objective, tol, mode, options.probes, rng, function_name=f"({o})"
        )
        _name_culprits(model, o, found, tol)
        pairs.extend(found)
        evaluations += count
        if model.outputs[o].shape:
            notes.append(f"second order: {description}")
        if objective.eager:
            notes.append(f"second order ({o}): the model could not be traced; ran eagerly")
    return pairs, evaluations, notes


def _name_culprits(model, output: str, pairs: list[PairResult], tol: Tolerance) -> None:
    """The op (or custom gradient) whose gradient function has a wrong derivative,
    for each failing pair (``ModelGraph.culprit(order=2)``); a bonus: a search
    that fails leaves a warning, never loses the report."""
    failing = [p for p in pairs if p.failed and p.verdict == MISMATCH]
    if not failing:
        return
    from gradcli.verdicts.culprit import ModelGraph

    graph = ModelGraph(model)
    for pair in failing:
        try:
            pair.culprit = graph.culprit(pair.input, output, tol, order=2)
        except Exception as exc:  # noqa: BLE001 - graph analysis is a bonus
            pair.warnings.append(f"could not search for the culprit op ({type(exc).__name__})")


def _single_output(model, output: str):
    """The model with only ``output`` among its outputs (so cotangents pick it)."""
    import dataclasses

    return dataclasses.replace(model, outputs={output: model.outputs[output]})
