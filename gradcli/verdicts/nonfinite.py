"""Non-finite values: NaN or Inf in a derivative, and where it comes from.

NaN rule at the point (``nonfinite_analytic``): an analytic NaN/Inf where the
ladder's slopes are finite, settled and equal is a wrong gradient (mismatch);
otherwise the point is a genuine singularity (exit 3). Both name the op of the
first non-finite value (``first_nonfinite``). A finite difference that is not
finite (``require_finite``) stops the check (exit 3), naming the point within
a step that gives it (``nonfinite_step``).
"""

from __future__ import annotations

import os

import numpy as np

from gradcli.errors import ModelError
from gradcli.numerics.autodiff import graph_gradients
from gradcli.numerics.finite_diff import step_size
from gradcli.results import Culprit
from gradcli.verdicts import compare
from gradcli.verdicts.ladder import COLUMNS_PER_BATCH, one_sided_ladder
from gradcli.verdicts.phrases import count, label


def require_finite(model_name, input_name, output, values, output_shape, input_shape, what,
                   locate=None):
    """Raise a ModelError naming input, output and element if ``values``
    (``[output size, input size]``) hold NaN or Inf; ``locate(column)``, if given,
    adds where the non-finite value comes from (``nonfinite_step``)."""
    values = np.asarray(values)
    if np.all(np.isfinite(values)):
        return
    row, col = (int(i) for i in np.argwhere(~np.isfinite(values))[0])
    out_index = compare.element_index(row, output_shape)
    in_index = compare.element_index(col, input_shape)
    why = "" if what == "analytic derivative" else (
        ": the function is not finite within a step of the point"
    )
    if locate is not None:
        try:
            why += locate(col)
        except Exception:  # locating is a bonus: the message stands without it
            pass
    raise ModelError(
        f"{model_name}: the {what} of {label(output, out_index)} with respect to "
        f"{label(input_name, in_index)} is {values[row, col]} at the point{why}"
    )


def nonfinite_step(fd, graph, input_name, output, col) -> str:
    """For a finite difference that is not finite: which of the points x +- h,
    x +- 2h along element ``col`` gives a non-finite output, and the op of the
    first non-finite value there (``first_nonfinite`` without the gradient)."""
    from gradcli.numerics.finite_diff import LEVELS

    x = fd.point[input_name]
    flat = x.reshape(-1)
    h = step_size(flat[col : col + 1], x.dtype)
    h = float(((flat[col : col + 1] + h) - flat[col : col + 1])[0])
    points = []
    for level in LEVELS:
        p = flat.copy()
        p[col] += level * h
        points.append(p.reshape(x.shape))
    values = fd.evaluate(input_name, np.stack(points))[output]
    for level, point, value in zip(LEVELS, points, values):
        if not np.all(np.isfinite(value)):
            site = first_nonfinite(graph, input_name, output, at=point, gradient=False) if graph else ""
            step = f"{'+' if level > 0 else '-'} {abs(level):g} h (h = {h:.3g})"
            return f" (at {label(input_name, compare.element_index(col, x.shape))} {step}" + (
                f"; the first non-finite value comes from {site})" if site else ")"
            )
    return ""


def nonfinite_analytic(model, input_name, output, analytic, fd, f0, x_shape, y_shape, tol, graph):
    """The analytic block (``[output size, input size]``) holds NaN or Inf at the
    point: what do finite differences see there? (module docstring, NaN rule)

    The one-sided ladder (``_ladder``) runs on up to COLUMNS_PER_BATCH columns
    with non-finite elements. An element is *smooth* when both one-sided slopes
    are finite, resolved (error estimate within ``compare.allowed_error`` of 0
    relative to ``Tolerance.resolve`` of the slope) and agree within
    ``compare.allowed_error``: the derivative exists, so a non-finite analytic
    value is a wrong gradient and the caller reports a ``mismatch`` with the
    returned explanation. Otherwise (slopes that disagree, are not finite or do
    not settle as the step shrinks) the point is a genuine singularity of the
    function and no derivative can be checked: ModelError (exit 3). Both name
    the op that produced the first non-finite value (``first_nonfinite``).
    """
    bad = ~np.isfinite(analytic)
    cols = np.flatnonzero(bad.any(axis=0))[:COLUMNS_PER_BATCH]
    left, right, left_err, right_err, *_ = one_sided_ladder(fd, input_name, output, f0, cols)
    sub = bad[:, cols]
    slope = np.maximum(np.abs(left), np.abs(right))
    with np.errstate(invalid="ignore"):
        settled = (
            np.isfinite(left) & np.isfinite(right)
            & (np.maximum(left_err, right_err) <= tol.atol + tol.resolve * slope)
        )
        agree = np.abs(left - right) <= compare.allowed_error(left, right, left_err + right_err, tol)
    smooth = sub & settled & agree
    singular = sub & ~smooth
    source = first_nonfinite(graph, input_name, output) if graph is not None else ""
    source = f"; the first non-finite value comes from {source}" if source else ""

    def element(mask):
        r, c = (int(i) for i in np.argwhere(mask)[0])
        return r, c, (
            f"{label(output, compare.element_index(r, y_shape))} with respect to "
            f"{label(input_name, compare.element_index(cols[c], x_shape))}"
        )

    if smooth.any():
        r, c, where = element(smooth)
        more = f"; {count(int(singular.sum()), 'more element')} at a singularity" if singular.any() else ""
        return (
            f"the analytic derivative is not finite where the function is smooth: "
            f"{where} is {analytic[r, cols[c]]}, but the one-sided slopes agree "
            f"(left {left[r, c]:.7g}, right {right[r, c]:.7g}){source}{more}"
        )
    r, c, where = element(singular)
    if not (np.isfinite(left[r, c]) and np.isfinite(right[r, c])):
        seen = f"one-sided slopes left {left[r, c]:.4g}, right {right[r, c]:.4g}: not finite on a side"
    elif not settled[r, c]:
        seen = (
            f"the one-sided slopes do not settle as the step shrinks (left {left[r, c]:.4g}, "
            f"right {right[r, c]:.4g}): unbounded"
        )
    else:
        seen = f"one-sided slopes disagree (left {left[r, c]:.7g}, right {right[r, c]:.7g})"
    raise ModelError(
        f"{model.name}: the analytic derivative of {where} is {analytic[r, cols[c]]} at the "
        f"point, a genuine singularity of the function ({seen}){source}"
    )


def first_nonfinite(graph, input_name: str, output: str, at=None, gradient=True) -> str:
    """The op whose value is the first non-finite one, in graph order, when the
    model's forward ops and then (with ``gradient``) the gradient of ``output``
    with respect to ``input_name`` run at the point (``at``: other values of
    ``input_name``): "Op at file:line", or "" when the graph cannot tell (not
    traceable, control flow that cannot be fetched). Gradient ops are located by
    their own model-file line (a custom gradient's function) or else by the
    forward op they differentiate."""
    found = _first_nonfinite_op(graph, input_name, output, at, gradient)
    return "" if found is None else _describe_site(graph, *found)


def nonfinite_culprit(graph, pair) -> Culprit | None:
    """The culprit of a pair whose analytic derivative is NaN or Inf where the
    function is smooth: the op that makes the first non-finite value of the
    gradient (``first_nonfinite``), not the first op whose own gradient
    disagrees with differences (every op downstream of a NaN does)."""
    found = _first_nonfinite_op(graph, pair.input, pair.output)
    if found is None:
        return None
    op, forward_ops = found
    description = _describe_site(graph, op, forward_ops)
    target = op
    if op not in forward_ops:  # a gradient op: locate it by the forward op it differentiates
        name = op.name.split("/", 1)[-1].split("_grad/")[0]
        try:
            target = graph.graph.get_operation_by_name(name)
        except (KeyError, ValueError):
            target = op
    site = graph.site(target, f"{description.split(' at ')[0]}: first non-finite value of the gradient")
    return Culprit(
        site=site, definition="", analytic=float("nan"),
        numeric=float(pair.worst.numeric) if pair.worst is not None else float("nan"),
        rel_error=float("inf"), checked_ops=0, checked="first non-finite value",
    )


def _first_nonfinite_op(graph, input_name, output, at=None, gradient=True):
    """(op, forward ops) of ``first_nonfinite``, or None."""
    import re

    try:
        if not graph.trace():
            return None
        g = graph.graph
        import tensorflow as tf

        # tf.gradients puts its ops under "gradients/", "gradients_1/", ...
        forward = [op for op in g.get_operations() if not re.match(r"gradients(_\d+)?/", op.name)]
        backward = []
        if gradient:
            known = set(g.get_operations())
            with g.as_default():
                graph_gradients(graph.outputs[output], graph.inputs[input_name])
            backward = [op for op in g.get_operations() if op not in known]
        point = {**graph.model.point, **({input_name: at} if at is not None else {})}
        feeds = [graph.inputs[n] for n in point]
        from gradcli.numerics.held import tensors_of
        feed_values = list(tensors_of(point).values())
        fed = {t.ref() for t in feeds}
        known = set(forward)
        for ops in (forward, backward):
            tensors = [t for op in ops for t in op.outputs
                       if t.dtype.is_floating and t.ref() not in fed]
            if not tensors:
                continue
            values = graph.prune(feeds, tensors)(*feed_values)
            for t, value in zip(tensors, values):
                if not np.all(np.isfinite(np.asarray(value))):
                    return t.op, known
    except Exception:  # graph analysis is a bonus: never lose the report
        return None
    return None


def _describe_site(graph, op, forward_ops) -> str:
    """``Op at file:line``; a gradient op names the forward op it differentiates."""
    model_file = os.path.abspath(graph.model.path)
    own = [f for f in op.traceback if os.path.abspath(f.filename) == model_file]
    if op in forward_ops or own:
        return f"{op.type} at {graph.location(op) or op.name}"
    # "gradients/<forward op name>_grad/...": the gradient of that op.
    name = op.name.split("/", 1)[-1].split("_grad/")[0]
    try:
        target = graph.graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return f"{op.type} (in the gradient)"
    return f"{op.type} in the gradient of {target.type} at {graph.location(target) or target.name}"
