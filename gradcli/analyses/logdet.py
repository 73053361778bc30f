"""``gradcli logdet``: a flow's declared log-det-Jacobian against the autodiff Jacobian.

A normalizing-flow layer maps R^n to R^n per example and declares
log|det dy/dx| per example (``log_det_jacobian``, as bijectors such as RealNVP
do). Here the full Jacobian block dy/dx comes from ``autodiff.jacobians``
(shape ``[B, n, B, n]``); the per-example Jacobians are its diagonal blocks,
and the off-diagonal blocks must be zero (the map must not mix examples).
``numpy.linalg.slogdet`` of each block gives (sign, log|det|), compared with the
declared value by the rule of ``compare``:
|declared - log|det|| <= atol + rtol * max(|declared|, |log|det||), with the
tolerances of the dtype the check runs in.

That Jacobian is first put to the test (``verdicts.flow_jacobian``, where the
rules and their constants are written): central differences of the flow along
a few random directions of the batch (``numerics.finite_diff``, the step rule
of every numeric derivative, in the precision the flow computes in, as
``check``'s precision rule reads it) against the autodiff products J v. Where
they disagree, the autodiff Jacobian is wrong, not the log-det: the gradient
at fault is searched for as ``check`` does (``ModelGraph.culprit``), and the
declared value is judged against the example's central-difference Jacobian.
Where a log-det disagrees with a Jacobian the differences vouch for, the code
computing it is named (``flow_jacobian.log_det_site``: in the model's traced
graph for a bijector's log-dets, in a trace of the file's
``log_det_jacobian`` otherwise).

The declared value has one element per example, or any shape that broadcasts
to the batch's (``[batch]``, or ``[]`` for one unbatched example), as
TensorFlow Probability writes it: a bijector whose Jacobian is constant
(``Scale``, ``ScaleMatvecTriL``, ``Householder``...) returns
``forward_log_det_jacobian(x, event_ndims=1)`` as a scalar, the same for every
example.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcli.errors import error_line
from gradcli.numerics import autodiff
from gradcli.verdicts import compare
from gradcli.errors import ModelError, UsageError
from gradcli.model.calling import Calling
from gradcli.analyses.load import load
from gradcli.model.loading import Model, definition_site, normalize_outputs, run_model, where_raised
from gradcli.options import LogdetOptions
from gradcli.analyses.reach import require_gradient
from gradcli.model.paths import relative_path
from gradcli.results.logdet import JACOBIAN_WRONG, LogdetExample, LogdetResult
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts import flow_jacobian

#: How many examples a report lists: all of them up to this many, else the
#: worst this many; in the order of the batch either way.
MAX_EXAMPLES = 10



def find_log_det(model: Model):
    """The model file's ``log_det_jacobian`` (module level, or an attribute of ``model``)."""
    candidates = [getattr(model.module, "log_det_jacobian", None)]
    target = getattr(model.module, "model", None)
    candidates.append(getattr(target, "log_det_jacobian", None))
    for fn in candidates:
        if callable(fn):
            return fn
    raise ModelError(
        f"{model.name}: defines no `log_det_jacobian` (a callable of the model's inputs "
        "returning log|det dy/dx| per example)"
    )


def check_logdet_path(spec: str, options: LogdetOptions) -> LogdetResult:
    """Load ``spec`` and check its ``log_det_jacobian`` (``gradcli logdet``)."""
    model = load(spec, options, wrt=[options.wrt] if options.wrt else None)
    return check_logdet(
        model, options.output, rtol=options.rtol, atol=options.atol, max_memory=options.max_memory,
        rng_seed=options.rng_seed,
    )


def check_logdet(model: Model, output: str | None, rtol=None, atol=None, max_memory=None,
                 rng_seed: int = 0) -> LogdetResult:
    flow = _Flow(model, rtol, atol, max_memory, rng_seed)
    if model.bijector is not None:
        return check_bijector(flow)
    if len(model.wrt) != 1:
        raise UsageError(
            f"{model.name}: logdet needs one input to differentiate, got "
            f"{', '.join(model.wrt)}; pick one with {{@wrt}}"
        )
    name = model.wrt[0]
    floating = [o for o, v in model.outputs.items() if np.issubdtype(v.dtype, np.floating)]
    if output is None:
        if len(floating) != 1:
            raise UsageError(
                f"{model.name}: the model has outputs {', '.join(model.outputs)}; pick one with {{@output}}"
            )
        output = floating[0]
    elif output not in model.outputs:
        raise UsageError(
            f"unknown output {output!r} (known: {', '.join(model.outputs)})"
        )
    x, y = np.asarray(model.point[name]), np.asarray(model.outputs[output])
    batched, batch, n = _per_example_map(model, name, output, x, y)
    require_gradient(model, [output], [name])
    function = _declared_function(model, find_log_det(model))
    declared = _declared(model, function, batch, batched)

    def locate():  # the code computing the declared value, in a trace of its own
        from gradcli.verdicts.culprit import ModelGraph

        def traced(values: dict) -> dict:
            value = function(values)
            return {"log_det_jacobian": next(iter(normalize_outputs(value, what="log_det_jacobian").values()))}

        own = dataclasses.replace(model, function=traced, outputs={"log_det_jacobian": declared},
                                  first_trace=None, taken_vjp=None, bijector=None)
        found = flow_jacobian.log_det_site(ModelGraph(own), "log_det_jacobian")
        # no op with a line (no graph): the function's own definition
        return found or (None, definition_site(model.module, model.path, "log_det_jacobian"))

    return _against_jacobian(flow, model.point, name, output, declared, locate=locate)


def _per_example_map(model: Model, name: str, output: str, x, y) -> tuple[bool, int, int]:
    """(batched, batch, n) of a map R^n -> R^n per example; else a ModelError."""
    if x.ndim not in (1, 2) or x.shape != y.shape:
        raise ModelError(
            f"{model.name}: logdet needs a map R^n -> R^n per example: input {name} has shape "
            f"{list(x.shape)} and output {output} {list(y.shape)} (expected equal shapes [n] "
            "or [batch, n])"
        )
    batched = x.ndim == 2
    batch, n = (x.shape if batched else (1, x.shape[0]))
    return batched, int(batch), int(n)


class _Flow:
    """What checking one flow shares between its directions (a bijector has
    two): the model, its tolerances, the random directions' generator, and
    the traced graph (``ModelGraph``), traced once when first needed."""

    def __init__(self, model: Model, rtol=None, atol=None, max_memory=None, rng_seed: int = 0):
        self.model, self.max_memory = model, max_memory
        self.tol = compare.tolerance(str(model.dtype), rtol, atol)
        self.rtol, self.atol = rtol, atol
        self.rng = np.random.default_rng(rng_seed)
        self._graph = None
        self._precision = None

    @property
    def graph(self):
        from gradcli.verdicts.culprit import ModelGraph

        if self._graph is None:
            self._graph = ModelGraph(self.model)
        return self._graph

    def precision(self) -> tuple[str, str]:
        """The dtype the flow computes in and its note (the precision rule of ``check``)."""
        if self._precision is None:
            from gradcli.analyses.check.precision import compute_precision

            self._precision = compute_precision(self.model, self.graph)
        return self._precision


def _against_jacobian(flow: _Flow, point: dict, name: str, output: str, declared,
                      declared_name: str = "log_det_jacobian", locate=None) -> LogdetResult:
    """``declared`` (one per example) against slogdet of each example's block
    of d output / d name at ``point``, that block first checked against
    central differences of the flow (module docstring). ``locate()`` gives the
    code that computes the declared value (``flow_jacobian.log_det_site``)."""
    model, tol = flow.model, flow.tol
    x = np.asarray(point[name])
    batch, n = (x.shape if x.ndim == 2 else (1, x.shape[0]))
    per_example = _per_example_jacobians(model, point, name, output, batch, n, tol, flow.max_memory)
    sign, logabsdet = np.linalg.slogdet(per_example)
    found, differenced, notes = _jacobian_evidence(flow, point, name, output, per_example)
    result = LogdetResult(
        name=model.name, path=model.path, input=name, output=output, dimension=int(n),
        batch=int(batch), dtype=str(model.dtype), tolerance=tol, notes=list(model.notes) + notes,
        declared_name=declared_name, jacobian_directions=flow_jacobian.DIRECTIONS,
    )
    examples = flow_jacobian.judge(declared, sign, logabsdet, found, differenced, tol)
    result.jacobian_findings = flow_jacobian.jacobian_findings(examples, batch, declared_name,
                                                               flow_jacobian.DIRECTIONS)
    result.log_det_findings = flow_jacobian.log_det_findings(examples, batch, declared_name)
    ranked = sorted(examples, key=lambda e: -np.nan_to_num(e.abs_error, nan=np.inf))
    result.examples = sorted(ranked[:MAX_EXAMPLES], key=lambda e: e.index)
    result.worst = ranked[0]
    result.n_failing = sum(e.ok is False for e in examples)
    result.n_not_judged = sum(e.ok is None for e in examples)
    result.n_jacobian_wrong = sum(e.jacobian == JACOBIAN_WRONG for e in examples)
    _example_notes(result, examples, batch, declared_name)
    _culprits(flow, result, name, output, locate)
    return result


def _per_example_jacobians(model, point, name, output, batch, n, tol, max_memory) -> np.ndarray:
    """Each example's block ``[B, n, n]`` of the autodiff Jacobian; a
    ModelError when an example's output depends on another example's input."""
    from gradcli.memory import dense_bytes, require_memory

    require_memory(  # the whole batch's Jacobian: it grows with batch**2
        dense_bytes((batch * n) ** 2), f"the Jacobian of the batch ({batch * n} x {batch * n} float64)",
        "Fewer examples in the inputs make it smaller", max_memory,
    )
    block = autodiff.jacobians(model.function, point, [name], [output]).blocks[(output, name)]
    if block is None:
        raise ModelError(f"{model.name}: TensorFlow returns no gradient of {output} for {name}")
    block = np.asarray(block, dtype=np.float64).reshape(batch, n, batch, n)
    per_example = np.stack([block[b, :, b, :] for b in range(batch)])
    mixed = block.copy()
    for b in range(batch):
        mixed[b, :, b, :] = 0.0
    if np.any(np.abs(mixed) > tol.atol):
        b, _, c, _ = (int(i) for i in np.argwhere(np.abs(mixed) > tol.atol)[0])
        raise ModelError(
            f"{model.name}: output example {b} depends on input example {c}: not a per-example map"
        )
    return per_example


def _jacobian_evidence(flow: _Flow, point, name, output, per_example) -> tuple:
    """The autodiff Jacobians against central differences of the flow along
    ``flow_jacobian.DIRECTIONS`` random directions of the batch, and each
    example's central-difference Jacobian where they disagree
    (``flow_jacobian``'s rules): (agreement, {example: (J, error)}, notes)."""
    from gradcli.numerics.finite_diff import FiniteDifferences

    batch, n, _ = per_example.shape
    x = np.asarray(point[name])
    precision, note = flow.precision()
    tol = flow.tol if precision == str(flow.model.dtype) else compare.tolerance(precision, flow.rtol, flow.atol)
    fd = FiniteDifferences(flow.model.function, point, [output], wrt=[name], precision=precision)
    directions = flow.rng.standard_normal((flow_jacobian.DIRECTIONS, *x.shape)).astype(x.dtype)
    along = fd.along(name, directions)
    shaped = lambda a: np.asarray(a, np.float64).reshape(len(a), batch, n)  # noqa: E731
    v = shaped(directions)
    analytic = np.einsum("bij,kbj->kbi", per_example, v)
    roundoff = flow_jacobian.analytic_roundoff(per_example, v, float(np.finfo(fd.rule_dtype(x.dtype)).eps))
    found = flow_jacobian.agreement(analytic, shaped(along.values[output]), shaped(along.errors[output]),
                                    roundoff, tol)
    wrong = [b for b, status in enumerate(found.status) if status == JACOBIAN_WRONG]
    differenced = {}
    if wrong:
        columns = fd.along_axes(name, np.concatenate([b * n + np.arange(n) for b in wrong]))
        values, errors = shaped(columns.values[output]), shaped(columns.errors[output])
        for i, b in enumerate(wrong):
            rows = slice(i * n, (i + 1) * n)
            differenced[b] = (values[rows, b, :].T, errors[rows, b, :].T)
    return found, differenced, [note] if note else []


def _example_notes(result: LogdetResult, examples, batch: int, declared_name: str) -> None:
    if batch > MAX_EXAMPLES:
        result.notes.append(f"the {MAX_EXAMPLES} worst of {batch} examples are listed")
    negative = [e.index for e in examples if e.sign < 0]
    if negative:
        result.notes.append(
            f"det J < 0 at examples {', '.join(map(str, negative[:10]))}: log|det J| compared"
        )
    singular = [e.index for e in examples if e.sign == 0 and e.ok is not None]
    if singular:
        result.notes.append(
            f"the Jacobian is singular at examples {', '.join(map(str, singular[:10]))} "
            "(log|det J| = -inf): those examples fail, whatever is declared"
        )
    undeclared = [e.index for e in examples if not np.isfinite(e.declared)]
    if undeclared:
        result.notes.append(
            f"{declared_name} is not finite at examples {', '.join(map(str, undeclared[:10]))}: "
            "those examples fail"
        )


def _culprits(flow: _Flow, result: LogdetResult, name: str, output: str, locate) -> None:
    """Where the wrong side is: the gradient ``check`` would name
    (``ModelGraph.culprit``) when the autodiff Jacobian is wrong; the code
    computing the declared value (``locate``) when the log-det is. Graph
    analysis is a bonus: a search that fails leaves a note, never the report."""
    searches = []
    if result.n_jacobian_wrong:
        searches.append(("culprit", lambda: flow.graph.culprit(name, output, flow.tol)))
    if result.n_failing and locate is not None:
        searches.append(("log_det_site", locate))
    for field, search in searches:
        try:
            found = search()
        except Exception as exc:  # graph analysis is a bonus: never lose the report
            result.notes.append(f"could not search for the {field.replace('_', ' ')} ({type(exc).__name__})")
            continue
        if field == "culprit":
            result.culprit = found
        elif found is not None:  # (site or None, the def line)
            result.log_det_site, result.log_det_definition = found


def check_bijector(flow: _Flow) -> LogdetResult:
    """A bijector's log-dets (``model.bijector``): forward's at x and inverse's
    at y = forward(x), each against slogdet of its own Jacobian
    (``_against_jacobian``; the inverse's is the result's ``inverse``), and
    the two against each other (``consistency``):
    forward_log_det_jacobian(x) = -inverse_log_det_jacobian(y) and
    inverse(forward(x)) = x, per example, by ``flow_jacobian.consistency``:
    |a - b| <= atol + rtol * max(|a|, |b|) (for the round trip the largest
    element's error of each example, against x's largest element)."""
    model, tol = flow.model, flow.tol
    x_name, y_name = model.bijector
    x, y = np.asarray(model.point[x_name]), np.asarray(model.outputs["forward"])
    batched, batch, _ = _per_example_map(model, x_name, "forward", x, y)
    point = {**model.point, y_name: y.astype(x.dtype)}  # y = forward(x) at the point checked
    at = {o: np.asarray(v) for o, v in run_model(model, point).items()}
    forward_ld = _per_example(at["forward_log_det_jacobian"], batch, batched, model.path, "forward_log_det_jacobian")
    inverse_ld = _per_example(at["inverse_log_det_jacobian"], batch, batched, model.path, "inverse_log_det_jacobian")
    require_gradient(model, ["forward"], [x_name])
    for direction in ("forward", "inverse"):
        name, declared = (x_name, forward_ld) if direction == "forward" else (y_name, inverse_ld)
        what = f"{direction}_log_det_jacobian"
        found = _against_jacobian(
            flow, point, name, direction, declared, what,
            locate=lambda what=what: flow_jacobian.log_det_site(flow.graph, what),
        )
        if direction == "forward":
            result = found
        else:
            result.inverse = found
    result.inverse.notes = [n for n in result.inverse.notes if n not in model.notes]
    back = np.reshape(at["inverse"], (batch, -1)).astype(np.float64)
    start = np.reshape(x, (batch, -1)).astype(np.float64)
    result.consistency = [
        flow_jacobian.consistency(f"forward_log_det_jacobian({x_name}) = -inverse_log_det_jacobian({y_name})",
                                  forward_ld, -inverse_ld, tol),
        flow_jacobian.consistency(f"inverse(forward({x_name})) = {x_name}", np.max(np.abs(back - start), axis=1),
                                  np.zeros(batch), tol, scale=np.max(np.abs(start), axis=1)),
    ]
    return result


def _declared_function(model: Model, fn):
    """``fn`` (the file's ``log_det_jacobian``) as a function of the point's
    named tensors, called as the user calls it, returning what it returns."""

    def declared(values: dict):
        tensors = dict(values)
        if model.structure is not None:  # nested inputs rebuilt, as the model function receives them
            tensors = model.structure.rebuild(tensors)
        return Calling.of(fn, tensors)(fn, tensors)

    return declared


def _declared(model: Model, function, batch: int, batched: bool) -> np.ndarray:
    tf = import_tensorflow()

    try:
        value = function(autodiff.fresh(model.point))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code: any exception but Ctrl-C is a model error
        raise ModelError(
            f"{where_raised(exc, model.path)}: log_det_jacobian raised "
            f"{type(exc).__name__}: {error_line(exc)}"
        ) from None
    site = definition_site(model.module, model.path, "log_det_jacobian")
    outputs = normalize_outputs(value, site, what="log_det_jacobian")
    value = np.asarray(next(iter(outputs.values())))
    if len(outputs) != 1 or value.dtype.kind not in "iuf":
        raise ModelError(
            f"{site}: log_det_jacobian must return one tensor of real numbers, one per example "
            f"(got {len(outputs)} outputs, {value.dtype})"
        )
    return _per_example(value, batch, batched, model.path, "log_det_jacobian")


def _per_example(value, batch: int, batched: bool, path: str, what: str) -> np.ndarray:
    """A declared log-det as one float64 per example: ``batch`` values, or any
    shape that broadcasts to the batch's (module docstring); else a ModelError."""
    value = np.asarray(value).astype(np.float64)
    if value.size == batch:
        return value.reshape(batch)
    try:  # one value for every example (a constant Jacobian), or any shape that broadcasts
        return np.broadcast_to(value, (batch,) if batched else ()).reshape(batch).copy()
    except ValueError:
        raise ModelError(
            f"{relative_path(path)}: {what} returned shape {list(value.shape)}, "
            f"expected one value per example ({batch}) or a shape that broadcasts to "
            f"{[batch] if batched else []}"
        ) from None


__all__ = ["check_logdet", "LogdetResult", "LogdetExample", "run_model"]
