"""Inspect derivatives: forward values, vector-Jacobian products, Jacobian-vector
products and full Jacobians of a loaded :class:`~gradcli.model.loading.Model`.

Every function takes a loaded model (``gradcli.model.loading.load_model``) and
returns a result dataclass holding the numbers; nothing here prints. Seeds are
validated against the model (unknown names, wrong shapes, non-floating targets
raise :class:`~gradcli.errors.UsageError`, exit 2).

Two ways to get each derivative:

* analytic (default): ``gradcli.numerics.autodiff`` - GradientTape / ForwardAccumulator,
  Jacobians vectorised with pfor;
* numeric (``numeric=True``): ``gradcli.numerics.finite_diff.FiniteDifferences`` only,
  for models TensorFlow cannot differentiate (e.g. a plain numpy function).
  Unit directions give Jacobian columns and J^T c; a tangent direction gives J t.
"""

from __future__ import annotations

import numpy as np

from gradcli.errors import error_line
from gradcli.analyses.reach import require_gradient
from gradcli.errors import GradcliError, ModelError, UsageError
from gradcli.memory import dense_bytes, require_memory
from gradcli.model.structure import split_complex_outputs
from gradcli.model.loading import Model, differentiable, is_floating
from gradcli.model.values import check_unknown, fit_value
from gradcli.results.inspection import (
    ForwardResult, JacobianBlock, JacobianEntry, JacobianResult, JvpResult, NamedArray, Summary,
    VjpResult, WeightNorm,
)

#: Summaries list this many leading entries of an array.
FIRST = 8
#: Jacobian summaries list this many entries of largest magnitude.
LARGEST = 10
#: Gradient-to-weight norm ratios r = ||g|| / ||w|| outside [VANISHING, EXPLODING]
#: get a warning. Rule: a gradient step with learning rate lr changes a weight by
#: a relative lr * r, and healthy training moves weights by about 1e-3 of their
#: size per step (r near 1 at the usual lr = 1e-3). Below r = 1e-4 that relative
#: change is under 1e-7, float32's resolution: the weight cannot move (vanishing).
#: Above r = 1e3 one step at lr = 1e-3 moves the weight by more than its own
#: size (exploding). Zero weights (fresh biases) have no scale and are not judged.
VANISHING = 1e-4
EXPLODING = 1e3



def _sci(value: float) -> str:
    """1e-4 and 1e3 rather than 0.0001 and 1000."""
    return f"{value:.0e}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")


WEIGHT_RULE = (
    f"status by r = ||g|| / ||w||: vanishing below {_sci(VANISHING)} (a step at lr 1e-3 "
    f"would change the weight by under 1e-7 of itself), exploding above {_sci(EXPLODING)} "
    "(it would change by more than the weight itself)"
)

ANALYTIC_VJP = "reverse mode (GradientTape.gradient with output_gradients = the cotangents)"
ANALYTIC_JVP = "forward mode (tf.autodiff.ForwardAccumulator)"
NUMERIC = (
    "finite differences only (central differences at +-h and +-2h, Richardson "
    "extrapolation; TensorFlow's gradients are not used)"
)


# --- helpers ----------------------------------------------------------------


def summarize(values: np.ndarray) -> Summary | None:
    """Statistics of real (or boolean) values; None for complex numbers and
    strings, which have no min or max (and a cast to float would drop the
    imaginary part): those are shown by their leading entries instead."""
    if np.asarray(values).dtype.kind not in "biuf":
        return None
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if flat.size == 0:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, [])
    return Summary(
        size=int(flat.size),
        min=float(flat.min()),
        max=float(flat.max()),
        mean=float(flat.mean()),
        norm=float(np.linalg.norm(flat)),
        first=[float(v) for v in flat[:FIRST]],
    )


def named(name: str, values, source: str = "", error: float | None = None, shape=None, dtype=None) -> NamedArray:
    if values is None:
        return NamedArray(name, list(shape), str(dtype), None, None, source, error)
    values = np.asarray(values)
    dtype = "string" if values.dtype.kind in "OSU" else str(values.dtype)  # tf.string -> bytes objects
    return NamedArray(name, list(values.shape), dtype, values, summarize(values), source, error)


def floating_outputs(model: Model) -> list[str]:
    """The outputs differentiated: floating ones with elements, complex ones
    as their real and imaginary parts (``structure.split_complex_outputs``)."""
    split_complex_outputs(model)
    return [o for o, v in model.outputs.items() if differentiable(v)]


def _need_floating_outputs(model: Model) -> list[str]:
    outputs = floating_outputs(model)
    if not outputs:
        raise ModelError(f"{model.name}: no floating-point output with elements to differentiate")
    return outputs


def _skipped_note(model: Model) -> list[str]:
    skipped = [o for o, v in model.outputs.items() if not differentiable(v)]
    if not skipped:
        return []
    return [f"outputs {', '.join(skipped)} are not floating-point or have no elements: not differentiated"]


def _analytic(model: Model, what: str, compute):
    """Run a TensorFlow derivative; a failure is a model error that points at the ``numeric`` option."""
    try:
        return compute()
    except GradcliError:
        raise
    except Exception as exc:  # TensorFlow raises many types when it cannot differentiate
        first = error_line(exc)
        raise ModelError(
            f"{model.name}: TensorFlow could not compute the {what} ({type(exc).__name__}: "
            f"{first}); a model that computes outside TensorFlow needs {{@numeric}}"
        ) from None


def _disconnected_note(names: list[str]) -> list[str]:
    """Some inputs do not reach the outputs (if none did, ``require_gradient``
    would have stopped the analysis)."""
    if not names:
        return []
    return [
        f"TensorFlow returns no gradient (None) for {', '.join(names)}: "
        "it does not reach the outputs (shown as disconnected, not zero)"
    ]


def _finite_differences(model: Model, outputs: list[str]):
    from gradcli.numerics.finite_diff import FiniteDifferences

    return FiniteDifferences(model.function, model.point, outputs)


def _eager_note(fd) -> list[str]:
    if fd.eager:
        return [
            "the model could not be traced by tf.function/vectorized_map (e.g. it runs "
            "numpy code): finite differences ran one point at a time"
        ]
    return []


# --- forward ----------------------------------------------------------------


def forward(model: Model) -> ForwardResult:
    """Each output's shape, dtype and values at the model's point."""
    return ForwardResult(
        model=model.name,
        dtype=str(model.dtype),
        outputs=[named(o, v) for o, v in model.outputs.items()],
        notes=list(model.notes),
    )


# --- vjp --------------------------------------------------------------------


def vjp(
    model: Model, cotangents: dict | None = None, *, numeric: bool = False, max_memory: int | None = None,
) -> VjpResult:
    """J^T c for each input in ``model.wrt``, summed over outputs.

    No cotangents: every floating output is seeded with ones, which is what
    ``tf.gradients(ys, xs)`` returns (the gradient of the sum of all outputs).
    Cotangents for some outputs: the others are seeded with zeros.
    """
    outputs = _need_floating_outputs(model)
    seeds, notes = _seeds(model, cotangents or {}, outputs)
    notes = list(model.notes) + _skipped_note(model) + notes
    evaluations = 0
    if numeric:
        # Finite differences along every axis of an input hold a column per element.
        widest = max((n for n in model.wrt), key=lambda n: np.size(model.point[n]), default=None)
        if widest is not None:
            _require_jacobian_memory(
                model, outputs, [widest], max_memory,
                "The analytic VJP (without {@numeric}) builds no Jacobian", "numeric Jacobian",
            )
        fd = _finite_differences(model, outputs)
        grads, errors = {}, {}
        for name in model.wrt:
            d = fd.along_axes(name)  # values[o]: [input size, *output shape]
            k = len(d.steps)
            grads[name] = sum(
                d.values[o].reshape(k, -1) @ seeds[o].reshape(-1) for o in outputs
            ).reshape(model.point[name].shape)
            errors[name] = float(
                np.max(sum(d.errors[o].reshape(k, -1) @ np.abs(seeds[o]).reshape(-1) for o in outputs),
                       initial=0.0)
            )
        evaluations = fd.evaluations
        notes += _eager_note(fd)
    else:
        require_gradient(model, outputs, numeric_option=True)
        grads = _analytic(
            model, "vector-Jacobian product",
            lambda: _autodiff().vjp(model.function, model.point, model.wrt, seeds),
        )
        errors = {}
        missing = [n for n in model.wrt if grads[n] is None]
        notes += _disconnected_note(missing)
    gradients = [
        named(
            n, grads[n], error=errors.get(n),
            shape=model.point[n].shape, dtype=model.point[n].dtype,
        )
        for n in model.wrt
    ]
    result = VjpResult(
        model=model.name,
        dtype=str(model.dtype),
        method=NUMERIC if numeric else ANALYTIC_VJP,
        seeds=[named(o, seeds[o], source=sources) for o, sources in _seed_sources(cotangents, outputs).items()],
        gradients=gradients,
        notes=notes,
        evaluations=evaluations,
    )
    if model.weights:  # Keras models, SavedModels, module-level layers and variables
        result.weights = weight_norms(model, grads)
        result.weight_rule = WEIGHT_RULE
        result.warnings = [
            f"{w.name}: gradient is {w.status} relative to the weight "
            f"(||g|| / ||w|| = {w.ratio:.3g}, outside [{_sci(VANISHING)}, {_sci(EXPLODING)}])"
            for w in result.weights
            if w.status in ("vanishing", "exploding")
        ]
    return result


def _seeds(model: Model, cotangents: dict, outputs: list[str]) -> tuple[dict, list[str]]:
    check_unknown(cotangents, model.outputs, "output for {@cotangents}")
    for name in cotangents:
        if name not in outputs:
            raise UsageError(
                f"{{@cotangents}} {name}: output {name!r} is {model.outputs[name].dtype}; "
                "only floating-point outputs can be seeded"
            )
    seeds = {}
    for o in outputs:
        y = model.outputs[o]
        if o in cotangents:
            seeds[o] = fit_value(cotangents[o], y, f"{{@cotangents}} {o}")
        elif cotangents:
            seeds[o] = np.zeros(y.shape, y.dtype)
        else:
            seeds[o] = np.ones(y.shape, y.dtype)
    if not cotangents:
        notes = [
            "no {@cotangents}: every output is seeded with ones, as tf.gradients(ys, xs) "
            "does (the gradient of the sum of all outputs)"
        ]
    else:
        zero = [o for o in outputs if o not in cotangents]
        notes = [f"output {o} gets a zero cotangent (none given)" for o in zero]
    return seeds, notes


def _seed_sources(cotangents, outputs) -> dict[str, str]:
    if not cotangents:
        return {o: "ones (default)" for o in outputs}
    return {o: "given" if o in cotangents else "zeros (not given)" for o in outputs}


def weight_norms(model: Model, grads: dict) -> list[WeightNorm]:
    """Norms of each Keras weight and of its gradient; status by VANISHING/EXPLODING."""
    rows = []
    for name in model.wrt:
        if name not in model.weights:
            continue
        w = float(np.linalg.norm(model.point[name]))
        g = grads.get(name)
        shape = list(np.shape(model.point[name]))
        if g is None:
            rows.append(WeightNorm(name, shape, w, None, None, "disconnected"))
            continue
        gn = float(np.linalg.norm(g))
        if w == 0.0:
            rows.append(WeightNorm(name, shape, w, gn, None, "zero weight"))
            continue
        ratio = gn / w
        status = "vanishing" if ratio < VANISHING else "exploding" if ratio > EXPLODING else "ok"
        rows.append(WeightNorm(name, shape, w, gn, ratio, status))
    return rows


# --- jvp --------------------------------------------------------------------


def jvp(model: Model, tangents: dict, *, numeric: bool = False, max_memory: int | None = None) -> JvpResult:
    """J t for every output; inputs without a tangent get zeros.

    Numeric or analytic, J t is one direction: no block grows with the input
    size, so ``max_memory`` has nothing to refuse (accepted for symmetry).
    """
    if not tangents:
        raise UsageError("jvp needs at least one {@tangents} INPUT=VALUE")
    check_unknown(tangents, model.point, "input for {@tangents}")
    fitted = {}
    for name, value in tangents.items():
        x = model.point[name]
        if not is_floating(x):
            raise UsageError(
                f"{{@tangents}} {name}: input {name!r} is {x.dtype}; only floating-point "
                "inputs can carry a tangent"
            )
        fitted[name] = fit_value(value, x, f"{{@tangents}} {name}")
    notes = list(model.notes)
    untouched = [n for n, v in model.point.items() if is_floating(v) and n not in fitted]
    if untouched:
        notes.append(f"zero tangent for {', '.join(untouched)} (none given)")
    evaluations = 0
    errors: dict[str, float] = {}
    if numeric:
        outputs = _need_floating_outputs(model)
        fd = _finite_differences(model, outputs)
        values = {o: 0.0 for o in outputs}
        for name, t in fitted.items():
            d = fd.along(name, t[None])
            for o in outputs:
                values[o] = values[o] + d.values[o][0]
                errors[o] = errors.get(o, 0.0) + float(np.max(d.errors[o][0], initial=0.0))
        evaluations = fd.evaluations
        notes += _eager_note(fd)
    else:
        require_gradient(model, floating_outputs(model), list(fitted), numeric_option=True)
        values = _analytic(
            model, "Jacobian-vector product",
            lambda: _autodiff().jvp(model.function, model.point, fitted),
        )
    return JvpResult(
        model=model.name,
        dtype=str(model.dtype),
        method=NUMERIC if numeric else ANALYTIC_JVP,
        tangents=[named(n, t, source="given") for n, t in fitted.items()],
        outputs=[named(o, np.asarray(v), error=errors.get(o)) for o, v in values.items()],
        notes=notes,
        evaluations=evaluations,
    )


# --- jacobian ---------------------------------------------------------------


def jacobian(
    model: Model, of: list[str] | None = None, *, numeric: bool = False, mode: str = "auto",
    max_memory: int | None = None,
) -> JacobianResult:
    """Full Jacobian blocks d output / d input for ``of`` (default: every floating
    output) and ``model.wrt``.

    Analytic mode picks reverse or forward by which needs fewer vectorised passes
    (``autodiff.choose_mode``): reverse needs one per output element, forward one
    per input element.
    """
    floating = _need_floating_outputs(model)
    outputs = list(of) if of else floating
    check_unknown(outputs, model.outputs, "output for {@of}")
    for o in outputs:
        if o not in floating:
            raise UsageError(
                f"{{@of}} {o}: output {o!r} ({model.outputs[o].dtype}, shape "
                f"{list(model.outputs[o].shape)}) is not floating-point or has no elements"
            )
    if mode not in ("auto", "reverse", "forward"):
        raise UsageError(f"must be auto, reverse or forward, got {mode!r}", param="mode")
    out_size = sum(int(np.size(model.outputs[o])) for o in outputs)
    in_size = sum(int(np.size(model.point[n])) for n in model.wrt)
    notes = list(model.notes) + ([] if of else _skipped_note(model))
    _require_jacobian_memory(
        model, outputs, model.wrt, max_memory,
        "A vector-Jacobian or Jacobian-vector product (vjp, jvp) builds no Jacobian",
        "numeric Jacobian" if numeric else "dense Jacobian",
    )
    errors = {}
    if numeric:
        fd = _finite_differences(model, outputs)
        raw = {}
        for name in model.wrt:
            d = fd.along_axes(name)
            k = len(d.steps)
            for o in outputs:
                out_shape = model.outputs[o].shape
                columns = np.moveaxis(d.values[o].reshape(k, -1), 0, 1)
                raw[(o, name)] = columns.reshape(out_shape + model.point[name].shape)
                errors[(o, name)] = float(np.max(d.errors[o], initial=0.0))
        mode_used, passes = "numeric", fd.evaluations
        explanation = (
            f"{fd.evaluations} function evaluations: 4 per input element "
            f"({in_size} input elements)"
        )
        notes += _eager_note(fd)
    else:
        require_gradient(model, outputs, numeric_option=True)
        jac = _analytic(
            model, "Jacobian",
            lambda: _autodiff().jacobians(model.function, model.point, model.wrt, outputs, mode),
        )
        raw, mode_used, passes = jac.blocks, jac.mode, jac.passes
        chosen = "chosen" if mode == "auto" else "requested"
        if jac.note:
            notes.append(jac.note)
        if mode_used == "reverse":
            explanation = (
                f"reverse mode ({chosen}): {passes} vectorised VJP passes, one per output "
                f"element (forward mode would need {in_size}, one per input element)"
            )
        else:
            explanation = (
                f"forward mode ({chosen}): {passes} vectorised JVP passes, one per input "
                f"element (reverse mode would need {out_size}, one per output element)"
            )
        missing = [f"{n} -> {o}" for (o, n), b in raw.items() if b is None]
        if missing:
            notes += _disconnected_note(missing)
    blocks = [
        jacobian_block(o, n, raw[(o, n)], model.outputs[o].shape, model.point[n].shape, errors.get((o, n)))
        for o in outputs
        for n in model.wrt
    ]
    return JacobianResult(
        model=model.name,
        dtype=str(model.dtype),
        method=NUMERIC if numeric else "analytic, vectorised with pfor (tf.vectorized_map)",
        mode=mode_used,
        passes=passes,
        explanation=explanation,
        blocks=blocks,
        notes=notes,
    )


def _require_jacobian_memory(model: Model, outputs, inputs, max_memory, cheaper: str, what: str) -> None:
    """Stop before building Jacobian blocks of ``outputs`` by ``inputs`` that
    would not fit (``gradcli.memory``: the blocks and their working copies)."""
    rows = sum(int(np.size(model.outputs[o])) for o in outputs)
    columns = sum(int(np.size(model.point[n])) for n in inputs)
    itemsize = np.dtype(model.dtype).itemsize
    require_memory(
        dense_bytes(rows * columns, itemsize),
        f"the {what} ({rows} x {columns} {np.dtype(model.dtype)})", cheaper, max_memory,
    )


def top_indices(magnitudes: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries, largest first (ties: lower index
    first), by partial selection: O(n) and no n-element sort."""
    k = min(k, magnitudes.size)
    if k == 0:
        return np.zeros(0, dtype=np.intp)
    candidates = np.argpartition(-magnitudes, k - 1)[:k]
    # Entries equal to the k-th largest may be cut arbitrarily by argpartition:
    # take all of them and keep the lowest indices, as a stable sort would.
    threshold = magnitudes[candidates].min()
    candidates = np.union1d(np.flatnonzero(magnitudes > threshold),
                            np.flatnonzero(magnitudes == threshold)[:k])
    order = np.lexsort((candidates, -magnitudes[candidates]))
    return candidates[order][:k]


def jacobian_block(output, input, values, output_shape, input_shape, error=None) -> JacobianBlock:
    block = JacobianBlock(output, input, list(output_shape), list(input_shape), None, error=error)
    if values is None:
        return block
    values = np.asarray(values).reshape(tuple(output_shape) + tuple(input_shape))
    block.values = values
    flat = np.abs(values.reshape(-1)).astype(np.float64)
    block.frobenius_norm = float(np.linalg.norm(flat))
    block.max_abs = float(flat.max(initial=0.0))
    block.nonzero = int(np.count_nonzero(flat))
    top = top_indices(flat, min(LARGEST, block.nonzero))
    rows, cols = block.rows, block.columns
    for i in top:
        r, c = divmod(int(i), cols) if cols else (int(i), 0)
        block.largest.append(
            JacobianEntry(
                output_index=[int(v) for v in np.unravel_index(r, output_shape)] if output_shape else [],
                input_index=[int(v) for v in np.unravel_index(c, input_shape)] if input_shape else [],
                value=float(values.reshape(rows, cols)[r, c]),
            )
        )
    return block


def inspect_path(what: str, spec: str, load, args: tuple = (), keywords: dict | None = None):
    """Load ``spec`` with ``load`` (``LoadOptions``) and run ``what`` (forward,
    vjp, jvp or jacobian) on it with ``args`` and ``keywords``: the command
    line's entry, run in a supervised worker (``gradcli.workers.batch``)."""
    from gradcli.analyses.load import load as load_for

    analysis = {"forward": forward, "vjp": vjp, "jvp": jvp, "jacobian": jacobian}[what]
    return analysis(load_for(spec, load), *args, **(keywords or {}))


def _autodiff():
    """``gradcli.numerics.autodiff``, imported on first use (it imports TensorFlow)."""
    from gradcli.numerics import autodiff as module

    return module
