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

The declared value has one element per example, or any shape that broadcasts
to the batch's (``[batch]``, or ``[]`` for one unbatched example), as
TensorFlow Probability writes it: a bijector whose Jacobian is constant
(``Scale``, ``ScaleMatvecTriL``, ``Householder``...) returns
``forward_log_det_jacobian(x, event_ndims=1)`` as a scalar, the same for every
example.
"""

from __future__ import annotations

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
from gradcli.results.logdet import Consistency, LogdetExample, LogdetResult
from gradcli.tf_import import import_tensorflow

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
        model, options.output, rtol=options.rtol, atol=options.atol, max_memory=options.max_memory
    )


def check_logdet(model: Model, output: str | None, rtol=None, atol=None, max_memory=None) -> LogdetResult:
    if model.bijector is not None:
        return check_bijector(model, compare.tolerance(str(model.dtype), rtol, atol), max_memory)
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
    declared = _declared(model, find_log_det(model), batch, batched)
    tol = compare.tolerance(str(model.dtype), rtol, atol)
    return _against_jacobian(model, model.point, name, output, declared, tol, max_memory)


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


def _against_jacobian(model: Model, point: dict, name: str, output: str, declared, tol, max_memory,
                      declared_name: str = "log_det_jacobian") -> LogdetResult:
    """``declared`` (one per example) against slogdet of each example's block
    of d output / d name at ``point`` (module docstring)."""
    x = np.asarray(point[name])
    batch, n = (x.shape if x.ndim == 2 else (1, x.shape[0]))
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
    sign, logabsdet = np.linalg.slogdet(per_example)
    result = LogdetResult(
        name=model.name, path=model.path, input=name, output=output, dimension=int(n),
        batch=int(batch), dtype=str(model.dtype), tolerance=tol, notes=list(model.notes),
        declared_name=declared_name,
    )
    errors = np.abs(declared - logabsdet)
    allowed = tol.atol + tol.rtol * np.maximum(np.abs(declared), np.abs(logabsdet))
    # A non-finite value on either side never passes: against log|det J| = -inf
    # (a singular Jacobian) the allowed error is itself infinite, and -inf = -inf
    # says nothing about whether the flow is right (it is not invertible there).
    finite = np.isfinite(declared) & np.isfinite(logabsdet)
    ok = finite & (errors <= allowed)
    examples = [
        LogdetExample(
            index=b, declared=float(declared[b]), logabsdet=float(logabsdet[b]),
            sign=float(sign[b]), abs_error=float(errors[b]), ok=bool(ok[b]),
        )
        for b in range(batch)
    ]
    ranked = sorted(examples, key=lambda e: -np.nan_to_num(e.abs_error, nan=np.inf))
    result.examples = sorted(ranked[:MAX_EXAMPLES], key=lambda e: e.index)
    result.worst = ranked[0]
    if batch > MAX_EXAMPLES:
        result.notes.append(f"the {MAX_EXAMPLES} worst of {batch} examples are listed")
    result.n_failing = int((~ok).sum())
    negative = [e.index for e in examples if e.sign < 0]
    if negative:
        result.notes.append(
            f"det J < 0 at examples {', '.join(map(str, negative[:10]))}: log|det J| compared"
        )
    singular = [e.index for e in examples if e.sign == 0]
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
    return result


def check_bijector(model: Model, tol, max_memory=None) -> LogdetResult:
    """A bijector's log-dets (``model.bijector``): forward's at x and inverse's
    at y = forward(x), each against slogdet of its own Jacobian
    (``_against_jacobian``; the inverse's is the result's ``inverse``), and
    the two against each other (``consistency``):
    forward_log_det_jacobian(x) = -inverse_log_det_jacobian(y) and
    inverse(forward(x)) = x, per example, by the rule of ``compare``:
    |a - b| <= atol + rtol * max(|a|, |b|) (for the round trip the largest
    element's error of each example, against x's largest element)."""
    x_name, y_name = model.bijector
    x, y = np.asarray(model.point[x_name]), np.asarray(model.outputs["forward"])
    batched, batch, _ = _per_example_map(model, x_name, "forward", x, y)
    point = {**model.point, y_name: y.astype(x.dtype)}  # y = forward(x) at the point checked
    at = {o: np.asarray(v) for o, v in run_model(model, point).items()}
    forward_ld = _per_example(at["forward_log_det_jacobian"], batch, batched, model.path, "forward_log_det_jacobian")
    inverse_ld = _per_example(at["inverse_log_det_jacobian"], batch, batched, model.path, "inverse_log_det_jacobian")
    require_gradient(model, ["forward"], [x_name])
    result = _against_jacobian(model, point, x_name, "forward", forward_ld, tol, max_memory,
                               "forward_log_det_jacobian")
    result.inverse = _against_jacobian(model, point, y_name, "inverse", inverse_ld, tol, max_memory,
                                       "inverse_log_det_jacobian")
    result.inverse.notes = []
    back = np.reshape(at["inverse"], (batch, -1)).astype(np.float64)
    start = np.reshape(x, (batch, -1)).astype(np.float64)
    result.consistency = [
        _consistency(f"forward_log_det_jacobian({x_name}) = -inverse_log_det_jacobian({y_name})",
                     forward_ld, -inverse_ld, tol),
        _consistency(f"inverse(forward({x_name})) = {x_name}", np.max(np.abs(back - start), axis=1),
                     np.zeros(batch), tol, scale=np.max(np.abs(start), axis=1)),
    ]
    return result


def _consistency(identity: str, a, b, tol, scale=None) -> Consistency:
    """The worst example of ``a`` = ``b`` (per example) by the rule of ``check_bijector``."""
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


def _declared(model: Model, fn, batch: int, batched: bool) -> np.ndarray:
    tf = import_tensorflow()

    try:
        tensors = {k: tf.convert_to_tensor(v) for k, v in model.point.items()}
        if model.structure is not None:  # nested inputs rebuilt, as the model function receives them
            tensors = model.structure.rebuild(tensors)
        value = Calling.of(fn, tensors)(fn, tensors)  # as the user calls it
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
