"""``explain``: what the graph adds once the pairs are compared.

Zero and disconnected pairs: where the graph cuts the path (``cut_sites``: a
stop_gradient, an integer cast...; ``none_gradient_sites`` for a gradient
TensorFlow returns as None), or that the input does not reach the output in
the graph at all. A cut made inside a library or a helper module is named
there too, and a cut the graph cannot show (a value turned into numpy
eagerly: ``library_cuts``) by the line that converts it; a failing mismatch
with analytic zeros where finite differences see a slope gets the same
search (``explain_lost_path``). Mismatches: the culprit op, the op whose own gradient is
wrong (for a NaN or Inf gradient, the op of its first non-finite value). The
Taylor test (``verdicts.taylor``) on every pair with ``options.taylor``, and
on failing mismatches and kinks always. Graph analysis is a bonus here: it
never loses the report.
"""

from __future__ import annotations

import numpy as np

from gradcli.results import DISCONNECTED, KINK, MISMATCH, ZERO
from gradcli.verdicts import differentiated_values, library_cuts, taylor
from gradcli.verdicts.nonfinite import nonfinite_culprit


def explain(model, pairs, fd, graph, tol, options) -> None:
    """Add graph sites to disconnected/zero pairs, the culprit op to mismatches,
    and the Taylor test (every pair with ``options.taylor``, failing ones always)."""
    for pair in pairs:
        if pair.input not in model.point:
            continue  # a joint pair (``check._JointCheck``): the layer table says where
        if pair.verdict in (DISCONNECTED, ZERO) and graph is not None:
            explain_cut_path(pair, graph)
        if pair.failed and pair.verdict == MISMATCH and graph is not None and _lost(pair):
            explain_lost_path(pair, graph)
        if pair.failed and pair.verdict == MISMATCH and graph is not None and pair.culprit is None:
            name_culprit(pair, graph, tol)
        if getattr(options, "taylor", False) or (pair.failed and pair.verdict in (MISMATCH, KINK)):
            pair.taylor = taylor.taylor_test(model, fd, pair.input, pair.output, options.rng_seed)
    differentiated_values.explain_shifts(model, pairs, fd, _check_dtype(model, fd))


def explain_cut_path(pair, graph) -> None:
    """A zero or disconnected pair: the ops that cut its path, or that the
    input does not reach the output in the graph."""
    try:
        sites = graph.cut_sites(pair.input, pair.output)
        if not sites and pair.verdict == DISCONNECTED:
            sites = graph.none_gradient_sites(pair.input, pair.output)
        if not sites and _numeric_slope(pair):
            sites = library_cuts.numpy_cut_sites(graph.model, pair.input)
    except Exception:  # graph analysis is a bonus: never lose the report
        sites = []
    if sites:
        where = _cite_cuts(pair, sites)
        if not pair.failed:  # one warning that says where, instead of "does not reach"
            pair.warnings = [
                w for w in pair.warnings if "does not reach" not in w and "is zero" not in w
            ]
            pair.warnings.append(
                f"{pair.input} reaches {pair.output} only through {where}: "
                "nothing can be learned through it"
            )
    elif pair.verdict == DISCONNECTED and graph.trace() and not _reaches(graph, pair):
        pair.explanation += f"; {pair.input} does not reach {pair.output} in the graph"


def explain_lost_path(pair, graph) -> None:
    """A failing mismatch with analytic zeros where finite differences see a
    slope (``_lost``): the ops that cut its path in the graph, else the
    places where its value leaves TensorFlow for numpy eagerly
    (``library_cuts.numpy_cut_sites``); the verdict stands."""
    try:
        sites = graph.cut_sites(pair.input, pair.output) or library_cuts.numpy_cut_sites(graph.model, pair.input)
    except Exception:  # graph analysis is a bonus: never lose the report
        sites = []
    if sites:
        _cite_cuts(pair, sites)


def _cite_cuts(pair, sites) -> str:
    """Add the cut ``sites`` to ``pair`` and its explanation; returns where they are, as worded."""
    pair.sites.extend(sites)
    where = ", ".join(f"{s.description} at {s.location or s.op_name}" for s in sites)
    pair.explanation += f"; the path is cut by {where}"
    return where


def _lost(pair) -> bool:
    """Some failing element of ``pair`` has an analytic value of exactly 0
    where finite differences see a slope (a path lost, not a wrong value)."""
    return any(e.analytic == 0 and e.numeric != 0 and np.isfinite(e.numeric) for e in pair.failing)


def _numeric_slope(pair) -> bool:
    """Finite differences see a slope at some element of a zero or
    disconnected pair (its worst or failing elements)."""
    elements = list(pair.failing) + ([pair.worst] if pair.worst is not None else [])
    return any(e.numeric != 0 and np.isfinite(e.numeric) for e in elements)


def name_culprit(pair, graph, tol) -> None:
    """A failing mismatch: the op whose own gradient is wrong; for a NaN or
    Inf analytic value, the op of the first non-finite value of the gradient
    (``nonfinite_culprit``); then forward mode's culprit where only forward
    mode failed; else ``ModelGraph.culprit``."""
    try:
        if pair.worst is not None and not np.isfinite(pair.worst.analytic):
            pair.culprit = nonfinite_culprit(graph, pair)
        if pair.culprit is None and not pair.reverse_failed and pair.forward_probe is not None:
            pair.culprit = graph.forward_culprit(pair.input, pair.output, pair.forward_probe)
        if pair.culprit is None:
            pair.culprit = graph.culprit(pair.input, pair.output, tol)
    except Exception as exc:  # graph analysis is a bonus: never lose the report
        pair.warnings.append(f"could not search for the culprit op ({type(exc).__name__})")


def _check_dtype(model, fd):
    """The dtype the check's steps and tolerances follow: the differences'
    rule dtype for the point's dtype (the compute precision when coarser)."""
    try:
        return fd.rule_dtype(model.dtype)
    except Exception:  # noqa: BLE001 - the point's own dtype
        return model.dtype


def _reaches(graph, pair) -> bool:
    """``ModelGraph.reaches``; True when the graph cannot tell (no claim then)."""
    try:
        return graph.reaches(pair.input, pair.output)
    except Exception:
        return True
