"""The precision rule's reading of the model graph (``compute_precision``):
the dtype whose steps and tolerances a check uses, and the note that names
what lowers it.
"""

from __future__ import annotations

from gradcli.model.loading import Model
from gradcli.numerics.finite_diff import coarser
from gradcli.verdicts.culprit import ModelGraph


def compute_precision(model: Model, graph: ModelGraph) -> tuple[str, str]:
    """The dtype whose steps and tolerances the check uses, and a note when it is
    not the point's: the lowest floating precision among the tensors that carry
    the differentiated values (``ModelGraph.precision``: the forward path from
    the differentiated inputs to the outputs, and the reverse pass's cotangents),
    never constants, shapes, counters or seeds beside them. Rule: a difference
    quotient cannot resolve more than the coarsest rounding inside the function,
    so a model fed float64 that computes in float32 is checked with float32
    rules. A lower precision weakens the check only when an op (or input) that
    lowers it can be named: the note gives its type, name and model-file line;
    with none to name, the point's dtype stays."""
    point_dtype = str(model.dtype)
    try:
        lowest, sites = graph.precision()
    except Exception:  # graph analysis is a bonus: keep the point's dtype
        return point_dtype, ""
    if lowest is None or lowest == point_dtype or coarser(point_dtype, lowest) == point_dtype:
        return point_dtype, ""
    if not sites:  # nothing to name: never weaken on an unnamed cause
        return point_dtype, ""
    where = ", ".join(_precision_site(s) for s in sites[:3])
    more = f" and {len(sites) - 3} more" if len(sites) > 3 else ""
    return lowest, (
        f"the model computes in {lowest} inside although its inputs are {point_dtype} "
        f"({where}{more}): steps and tolerances for {lowest}"
    )


def _precision_site(site) -> str:
    """``Cast at model.py:12 (op cast_1)``: what lowers the precision, where."""
    what = site.description.split(" -> ")[0]
    if site.op_type == "Placeholder":
        return what
    where = f" at {site.location}" if site.location else ""
    return f"{what}{where} (op {site.op_name})"


def reaches(graph: ModelGraph, name: str, output: str) -> bool:
    try:
        return graph.reaches(name, output)
    except Exception:  # graph analysis is a bonus: no path known
        return False
