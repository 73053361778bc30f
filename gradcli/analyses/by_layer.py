"""Check a Keras model (or a network of tf.Modules) layer by layer: where in a
large network a gradient is wrong.

A full check costs one finite difference per weight and a fast check gives one
verdict for the whole model. This pass runs the model once, captures what
reaches each layer, and checks every layer *locally*: its output as a function
of its floating inputs and its trainable weights, at the captured activations,
by the rules of ``analyses.check`` (both autodiff modes, the same step rule,
verdict rules and power). A layer that fails is named with its class, its path
in the model and the line of its ``call``; its pairs name the weight or input
element and the op (or ``tf.custom_gradient``) at fault.

Which layers (``layer_units``): the model tree is walked from the root through
every ``keras.Model`` (functional, Sequential, subclassed, nested models); every
layer that is not a model is one unit and is checked whole, its sublayers with
it (``MultiHeadAttention`` with its projections, a user's residual block with
its ops). Ops a model applies between its layers (a functional ``x + y``, a
subclassed model's own arithmetic) belong to no unit: the whole-model check
covers them. A network of ``tf.Module`` objects (a model function of the model file's
module-level tf.Modules, or one of them as the model: ``_ModuleTree``) has no
model/layer distinction, so every module under a module-level one is a unit,
a container (a residual block) as well as the modules inside it, each checked
whole: a wrong custom gradient fails its own module and every container
holding it, the innermost listed first, and a container's own arithmetic
between its modules is checked in the container's row. A module-level
tf.Module that holds no other is a unit itself, unless it is the model. A
layer called more than once (a shared layer) is checked at
*every* call site, since each call sees other activations (a gradient wrong on
part of the input range may be hit at one site only); the rows say which call.

How activations are captured (``_record``): ``keras.layers.Layer.__call__`` is
wrapped for the duration of one forward pass of ``Model.function`` (the float64
clone the check runs) and, to pair each unit with the user's own layer, one of
``Model.own_call`` (the user's model in its own dtypes). The wrapper records
the arguments of every unit's call (outermost only), the values its variables
hold in that call, and its outputs.

A tf.Module unit is recorded by wrapping its class's ``__call__`` (every call
of a unit, containers' and the modules' inside them); its local function runs
the Python body of that ``__call__`` (a ``tf.function`` one too) with the
unit's weights substituted as the whole model's are (``model.variables``:
the variables' attributes replaced by the checked tensors), its own call is
the module object called as the user calls it, on its own variables, and it
has no trace shared with other units (no stateless call): each goes to
``check_model``.

The local function and the proof that it is the layer's own: the unit's
float64 clone is called with ``stateless_call(weights, frozen, *args,
**kwargs)``: the captured arguments with the floating tensors replaced by the
checked values (a mask, a ``training`` flag stay as captured). Its output is
contracted with a fixed random cotangent c (a standard normal draw scaled to
unit norm, seeded by the check's seed and the call's position): the checked
function is the scalar
<c, layer(x, w)>, whose gradient is J^T c, exactly what backpropagation
through the layer computes for an upstream gradient c. An element of J that
is wrong moves J^T c unless c is orthogonal to its error (probability zero);
a scalar keeps each full check to 2 n evaluations with no dense output
block, and puts exact zeros (a key bias inside attention, to which softmax is
invariant) in the same position as in the loss of the whole model. Unit norm
makes <c, y> the size of one output element, as a loss averaged over its
elements is, so the check's absolute tolerance means what it means for a loss
rather than shrinking against a sum that grows with the layer's width
(round-off in the numeric derivative of an exact zero grows with |<c, y>|).
The user's own
call for ``verdicts.same_function`` is the original layer object called with
the same arguments (``layer(*args, **kwargs)``), with a tape on its variables:
a local function that is not the layer's own call fails the layer.

Cost: one trace per signature, one call per unit. Tracing, not arithmetic,
is what a layer's check costs at these sizes (0.5-2 s per layer through
``check_model``, which traces its own functions for every layer). A unit's
*signature* (``_signature``) is its layer's class and configuration (the name
aside), the structure of its call's arguments with their shapes and dtypes
(the values of those that are not floating tensors), and the shapes and dtypes
of its weights and outputs; for a layer without weights (an activation, an
add, a pooling) the ranks of its tensors instead of their shapes, its trace
leaving the other dimensions open after the second shape
(``reduce_retracing``). Calls of one signature compute the same function of
(inputs, weights, frozen weights, cotangents), so they share one ``_Traced``:
the float64 clone of the first such layer, called by ``stateless_call`` with
every one of these as an argument of a ``tf.function``. The repeated blocks of
a ResNet-50 (176 layer calls) come to about 40 signatures, the blocks of a
Transformer stack to one each of attention, norm, dense and add.

The quick check (``_quick_check``) of a unit checked by projections runs
``check._FastCheck``'s draws, its ``project`` rule (``compare_projections``,
``detectable_error``) and its forward-mode rule (``forward_wrong``), with every
product of the unit taken in *one* call of ``_Traced.probe``: the
finite-difference points of all its inputs and probes (``numerics.finite_diff``
plans them, step rule and Richardson unchanged, ``_BatchedDifferences``), the P
VJPs (one forward pass, P backward passes) and the P JVPs along the joint
tangents (forward mode traced op by op, as eagerly). Then
``verdicts.same_function.prove`` compares that traced function with the
user's own layer object, called eagerly: a shared trace that computed another
function (state the configuration does not show) is caught there. The quick
check settles a unit only when every pair passes (or is a confirmed ``zero``,
reported without the graph site that cuts it) and the proof finds no other
function. Everything else goes to ``check_model`` on the unit's own eager
call, which traces it for itself: a failing pair (named elements, the culprit
and Taylor test), a proof that differs, a layer whose function cannot be
traced in a loop (a ``tf.custom_gradient`` taking a Python flag), and a
signature whose forward path holds a floating tensor coarser than the point
(``_Traced.computes_below``: then the precision rule of ``check_model`` sets
the tolerances). A pass is therefore never weaker than ``check_model``'s, and
a failure is reported by ``check_model`` itself.

The tie rule (``_at_broken_ties``): the captured activations of a real
network hold exact ties (the zeros a relu makes, met again in a max-pool
window), and a max over tied elements is non-smooth in several elements at
once. ``diagnose.refine``'s kink test bounds the analytic value by the
one-sided slopes along one element, which is a subgradient's bound only when
that element is non-smooth on its own: at a tie of several, a valid subgradient
(the gradient of one active piece: the first maximum of each window) can lie
outside it. A unit whose only failures are such kinks, each at an input
element whose value another element of that input holds exactly, is checked again with its
floating inputs x moved off the ties by ``TIE_BREAK`` max(1, |x|) times a
standard normal draw (weights unchanged), where it is
differentiable: through its signature's trace when it is checked by
projections (``_quick_check``), by ``check_model`` when it is checked in full
or the projections do not settle it. It passes there: the kink is earned (a gap between the slopes,
a non-smooth op on the path, a right gradient at the nearby points where the
layer is smooth) and the row is ``kink``, not a failure, with a note. It fails
there: the row shows that check's failure.

Mode of a unit (``unit_mode``): ``full`` (every element of the gradient) when
it has at most ``FULL_ELEMENTS`` differentiated elements (about the cost of one
traced batch of differences); else ``fast``: ``CheckOptions.probes`` random
projections, whose power (the smallest single-element error seen with 95%
probability, ``compare.detectable_error``) is reported per layer.

Memory (``_require_memory``): before any activation is held, a first forward
pass records only shapes; the predicted peak is the captured activations
(inputs and outputs of every unit, float64) plus the largest unit's working
set (its gradient blocks and the evaluated outputs in full mode, ``FAST_COPIES``
copies of its inputs and outputs per probe in fast mode, each counted
``gradcli.memory.COPIES`` times).
Beyond the limit the pass stops with a usage error naming the cheaper routes.

Progress and the estimate: ``gradcli.progress.report("layers", done, total,
label)`` after each unit; before the first, the pass is estimated
(``_estimate``) from the shape pass at ``SECONDS_PER_SIGNATURE`` per signature
of the fast units, ``SECONDS_PER_UNIT`` per fast unit, ``SECONDS_PER_FULL_UNIT``
per full unit, plus ``FORWARD_MULTIPLE`` forward passes of the model (the
evaluations and products of the local checks sum to a few forward passes),
timed in the shape pass; the result's note gives the estimate, the number of
traced local functions and the time taken. The constants come from
``bench/layer_speed.py``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from gradcli.errors import GradcliError, UsageError, debugging, internal_error_message
from gradcli.model.keras_float64 import stateless
from gradcli.numerics import autodiff
from gradcli.numerics.finite_diff import FiniteDifferences
from gradcli.options import CheckOptions
from gradcli.results import KINK, PASS
from gradcli.results.by_layer import LAYER_ERROR, LayerResult

#: Full check of a unit up to this many differentiated elements: its first pass
#: is one traced batch of 2 n evaluations (``check.JOINT_LIMIT``).
FULL_ELEMENTS = 2048
#: The one output of a unit's local function: <c, layer output>.
PROJECTED = "output_dot_c"
#: Fast mode keeps about this many copies of a unit's inputs and outputs per
#: probe (the +-h points of two Richardson levels, tangents and cotangents).
FAST_COPIES = 6
#: Estimate up front (``_estimate``), calibrated on bench/layer_speed.py:
#: seconds per signature of the fast units (one trace of ``_Traced.value`` and
#: one of ``_Traced.probe``, and the first backward function of the proof),
#: per fast unit (one traced call, the proof's eager call of the user's layer,
#: the comparisons), per full unit (``check_model``), and forward passes of the
#: model for the arithmetic that grows with the layers' size.
SECONDS_PER_SIGNATURE = 0.5
SECONDS_PER_UNIT = 0.05
SECONDS_PER_FULL_UNIT = 0.25
FORWARD_MULTIPLE = 40.0
#: The tie rule: a unit whose only failures are kinks is checked again with its
#: floating inputs x moved by TIE_BREAK max(1, |x|) times a standard normal
#: draw: about 1300 float64 finite-difference steps, so that two tied elements
#: end up within the ladder's reach of each other (h / 2**LADDER) with
#: probability about 1e-6 (a ResNet-50's first max-pool has some 1e5 tied
#: pairs), and under 1% of the activation's size, the same region of the
#: layer's input range.
TIE_BREAK = 2.0**-7
#: The ordered tie break (``_ordered_tie_break``): tied elements moved by
#: ORDERED_BREAK max(1, |x|) (1 - i / n), i their flat index, n the input's size,
#: so earlier elements end up larger (or, the other order, smaller). About 1e-9
#: relative: the increments of neighbouring indices (ORDERED_BREAK / n) stay
#: above float64's ulp for inputs of up to 10**6 elements, and far below any gap
#: between distinct values of a real activation.
ORDERED_BREAK = 2.0**-30


@dataclass
class LayerCall:
    """One captured call of a unit: the clone's layer (float64), the user's
    layer, and what the call received and returned."""

    layer: object
    own: object | None
    path: str
    index: int
    args: tuple
    kwargs: dict
    trainable: list
    non_trainable: list
    outputs: object
    calls: int = 1
    order: int = 0  # position among the captured calls (seeds its cotangent)
    names: list = field(default_factory=list)  # weight names, in trainable_variables order
    tree: object = None  # the ``_ModuleTree`` of a tf.Module unit
    policies: bool = False  # computed in float64 by switching dtype policies (``keras_float64``)


def wants_layers(model, options: CheckOptions, mode: str) -> bool:
    """Whether ``check_model`` runs the pass: forced by ``by_layer`` or
    ``layers``, else in auto mode when auto chose the fast check (a full check
    does not fit the budget), for Keras models and networks of tf.Modules."""
    if options.by_layer is False or not (model.kind == "keras" or _module_roots(model)):
        return False
    if options.by_layer or options.layers:
        return True
    return options.mode == "auto" and mode == "fast"


@dataclass
class LayerPlan:
    """What ``plan_layers`` decided before any layer is checked: the root, the
    calls selected (from the shape pass), the estimate; or why the pass does
    not run (``skipped``)."""

    root: object = None
    calls: list = field(default_factory=list)
    estimate: float = 0.0
    seconds: float = 0.0  # the shape pass's
    skipped: str | None = None


def plan_layers(model, options: CheckOptions) -> LayerPlan:
    """The pass's first steps, each a refusal before any work (``check_model``
    runs this before the whole-model check): find the Keras model, the shape
    pass, ``layers``' selection (a usage error when it matches nothing), the
    memory guard and the estimate."""
    root = _keras_root(model)
    if root is None and model.kind == "keras":
        return LayerPlan(skipped="layer-by-layer pass not run: the Keras model object could not be found")
    if root is None:
        root = _ModuleTree(model)
        if not root.units:
            return LayerPlan(skipped=(
                "layer-by-layer pass not run: the model calls no Keras model or tf.Module other than "
                "itself (the whole-model check is its check)"
            ))
    import keras

    if isinstance(root, keras.layers.Layer) and not isinstance(root, keras.Model):
        return LayerPlan(
            skipped="layer-by-layer pass not run: the model is a single layer (the whole-model check is its check)"
        )
    started = time.perf_counter()
    shapes, forward_seconds = _shape_pass(model, root)
    calls = [c for c in shapes if _selected(c, options.layers)]
    if options.layers and not calls:
        known = ", ".join(dict.fromkeys(c.path for c in shapes))
        raise UsageError(f"match no layer (layers: {known[:400]})", param="layers", bad_value=True)
    _require_memory(shapes, calls, options)
    estimate = _estimate(calls, forward_seconds * len(calls) / max(len(shapes), 1))
    return LayerPlan(root=root, calls=calls, estimate=estimate, seconds=time.perf_counter() - started)


def check_layers(model, options: CheckOptions, plan: LayerPlan | None = None) -> tuple[list[LayerResult], list[str]]:
    """The layer-by-layer pass of ``model`` (a Keras ``Model``): one result per
    checked unit call, failures first, and notes for the model's report.
    ``plan``: ``plan_layers``' result when the caller took it already."""
    from gradcli.progress import report

    plan = plan_layers(model, options) if plan is None else plan
    if plan.skipped:
        return [], [plan.skipped]
    started = time.perf_counter() - plan.seconds
    calls, estimate = plan.calls, plan.estimate
    report("layers", 0, len(calls), f"estimated {estimate:.0f} s")
    captured = _capture(model, plan.root) if not isinstance(plan.root, _ModuleTree) else plan.root.capture()
    wanted = {(c.path, c.index) for c in calls}
    results, traces = [], {}
    for done, call in enumerate((c for c in captured if (c.path, c.index) in wanted), start=1):
        results.append(_check_call(model, call, options, traces))
        report("layers", done, len(calls), call.path)
    results.sort(key=lambda r: (not r.failed, r.verdict != LAYER_ERROR))
    seconds = time.perf_counter() - started
    full = sum(r.mode == "full" for r in results)
    fast = sum(r.mode == "fast" for r in results)
    notes = [
        f"layer by layer: {len(results)} layer calls checked ({full} in full, {fast} by random "
        f"projections, {len(traces)} local functions traced) in {seconds:.1f} s (estimated "
        f"{estimate:.0f} s up front)"
    ]
    errors = [r for r in results if r.verdict == LAYER_ERROR]
    if errors:
        notes.append(f"{len(errors)} layer calls could not be checked on their own: see the layer table")
    return results, notes


def _estimate(calls: list[LayerCall], forward_seconds: float) -> float:
    """Seconds predicted for the pass (module docstring), from the shape pass."""
    import tensorflow as tf

    signatures, full = set(), 0
    for call in calls:
        size = sum(s.size for s in tf.nest.flatten((call.args, call.kwargs, call.trainable))
                   if isinstance(s, _ShapeOnly))
        if unit_mode(size) == "full":
            full += 1
        else:
            try:
                signatures.add(_signature(call))
            except Exception:  # noqa: BLE001 - an estimate: count it as its own
                signatures.add(id(call))
    return (len(signatures) * SECONDS_PER_SIGNATURE + (len(calls) - full) * SECONDS_PER_UNIT
            + full * SECONDS_PER_FULL_UNIT + FORWARD_MULTIPLE * forward_seconds)


# --- which layers --------------------------------------------------------------


def layer_units(root) -> dict[int, str]:
    """id -> path of every unit under ``root`` (module docstring): descend
    through models, stop at the first layer that is not one."""
    import keras

    units, stack, seen = {}, [(root, root.name)], set()
    while stack:
        layer, path = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        for sub in layer._flatten_layers(include_self=False, recursive=False):
            if isinstance(sub, keras.layers.InputLayer):
                continue
            where = f"{path}/{sub.name}"
            if isinstance(sub, keras.Model):
                stack.append((sub, where))
            elif id(sub) not in units:
                units[id(sub)] = where
    return units


def _selected(call: LayerCall, patterns) -> bool:
    """``layers``: a name, a path, a path's tail or a glob of any of them."""
    if not patterns:
        return True
    name = call.path.rsplit("/", 1)[-1]
    tails = {call.path, name, call.path.split("/", 1)[-1]}
    return any(fnmatch.fnmatchcase(t, p) for p in patterns for t in tails)


def unit_mode(elements: int, output_elements: int = 1) -> str:
    """``full`` or ``fast`` for a unit's local function (module docstring)."""
    return "full" if elements <= FULL_ELEMENTS and output_elements == 1 else "fast"


# --- capture ---------------------------------------------------------------------


_recording = threading.local()


@contextmanager
def _record(units: dict[int, str], sink: list, keep: bool):
    """Wrap ``Layer.__call__`` so the outermost call of each unit is recorded
    into ``sink`` (``keep``: with its tensors; else shapes only). Only calls
    made on this thread are recorded: the whole-model check running beside the
    pass (``check.check_model``) calls the same layers meanwhile."""
    import keras

    original = keras.layers.Layer.__call__
    counts: dict[int, int] = {}
    owner = threading.get_ident()

    def recording(self, *args, **kwargs):
        if id(self) not in units or getattr(_recording, "inside", False) or threading.get_ident() != owner:
            return original(self, *args, **kwargs)
        _recording.inside = True
        try:
            outputs = original(self, *args, **kwargs)
            trainable = [v.value for v in self.trainable_variables]
            frozen = [v.value for v in self.non_trainable_variables]
        finally:
            _recording.inside = False
        counts[id(self)] = counts.get(id(self), 0) + 1
        if keep:
            sink.append(LayerCall(self, None, units[id(self)], counts[id(self)], args, kwargs,
                                  trainable, frozen, outputs))
        else:
            sink.append(LayerCall(self, None, units[id(self)], counts[id(self)], _shapes(args),
                                  _shapes(kwargs), _shapes(trainable), [], _shapes(outputs)))
        return outputs

    keras.layers.Layer.__call__ = recording
    try:
        yield
    finally:
        keras.layers.Layer.__call__ = original
        _recording.inside = False


def _shapes(structure):
    """Floating tensors as their shapes (``_ShapeOnly``), the rest dropped."""
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda t: _ShapeOnly(tuple(t.shape)) if _floating_tensor(t) else None, structure
    )


@dataclass(frozen=True)
class _ShapeOnly:
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _floating_tensor(value) -> bool:
    dtype = getattr(value, "dtype", None)
    if dtype is None or not hasattr(value, "shape"):
        return False
    try:
        return np.issubdtype(np.dtype(getattr(dtype, "as_numpy_dtype", dtype)), np.floating)
    except TypeError:
        return False


def _tensors(model, values: dict):
    import tensorflow as tf

    return {n: tf.convert_to_tensor(v) for n, v in values.items()}


def _shape_pass(model, root) -> tuple[list[LayerCall], float]:
    """The units' calls with shapes only (nothing held), and the seconds of one
    forward pass of the checked function."""
    sink: list = []
    recording = root.recording(sink, keep=False) if isinstance(root, _ModuleTree) else _record(
        layer_units(_runner(model)), sink, keep=False
    )
    started = time.perf_counter()
    with recording:
        model.function(_tensors(model, model.point))
    seconds = time.perf_counter() - started
    _count_calls(sink)
    return sink, seconds


def _capture(model, root) -> list[LayerCall]:
    """The units' calls with their tensors, through the checked function (the
    float64 clone), each paired with the same call of the user's own layer."""
    runner = _runner(model)
    clone_calls: list = []
    with _record(layer_units(runner), clone_calls, keep=True):
        model.function(_tensors(model, model.point))
    _numbered(clone_calls)
    own_calls: list = []
    own = model.own_call
    if own is not None:
        data = {
            n: np.asarray(v).astype(model.native_dtypes.get(n, np.asarray(v).dtype))
            for n, v in model.point.items() if n not in model.weights
        }
        try:
            with _record(layer_units(root), own_calls, keep=False):
                own.call(_tensors(model, data))
        except Exception:  # noqa: BLE001 - no pairing: every layer's proof says so
            own_calls = []
    pairs = len(own_calls) == len(clone_calls) and all(
        (a.path, a.index, type(a.layer).__name__) == (b.path, b.index, type(b.layer).__name__)
        for a, b in zip(clone_calls, own_calls)
    )
    names = _weight_names(model, runner)
    policies = model.float64_by_policies and str(model.dtype) == "float64"
    for i, call in enumerate(clone_calls):
        call.policies = policies
        call.own = own_calls[i].layer if pairs else None
        call.names = [names.get(id(v), _short(v.path)) for v in call.layer.trainable_variables]
    return clone_calls


class _ModuleTree:
    """The units of a model made of ``tf.Module`` objects (module docstring):
    every module below the model file's module-level tf.Modules, and a
    module-level one itself when it holds no other (a leaf the model function
    calls) and is not the model itself."""

    def __init__(self, model):
        import tensorflow as tf

        from gradcli.model.variables import find_weights, objects_by_path, variables_by_path

        self.model, self.weights = model, find_weights(model.module)
        names = {id(v): n for n, (_, _, v) in self.weights.slots.items()}
        self.units: dict[int, str] = {}
        self.modules: dict[int, object] = {}
        self.names: dict[int, list] = {}
        own = model.own_call
        targets = {id(v) for v in _closure_values(own.call)} if own is not None else set()
        for root in _module_roots(model):
            below = objects_by_path(root, tf.Module).values()
            found = [(f"{root.name}/{path}", m) for path, _, _, m in below]
            if not below and id(root) not in targets:
                found = [(root.name, root)]
            for path, module in found:
                if id(module) not in self.units and callable(module):
                    self.units[id(module)], self.modules[id(module)] = path, module
                    self.names[id(module)] = [
                        names[id(v)] for _, _, _, v in variables_by_path(module).values() if id(v) in names
                    ]

    @contextmanager
    def recording(self, sink: list, keep: bool):
        """Each unit's class's ``__call__`` wrapped for the duration (every
        call of a unit recorded, a container's and those of the units inside
        it, inner ones first). A ``tf.function`` ``__call__`` runs its Python
        body, which reads the substituted weights (``model.variables``)."""
        classes = {type(m) for m in self.modules.values()}
        saved = {cls: cls.__dict__.get("__call__") for cls in classes}
        originals = {cls: next(k.__dict__["__call__"] for k in cls.__mro__ if "__call__" in k.__dict__)
                     for cls in classes}
        counts: dict[int, int] = {}
        point = self.model.point

        def wrapper(cls, original):
            plain = getattr(original, "python_function", original)

            def recording(module, *args, **kwargs):
                outputs = plain(module, *args, **kwargs)
                if id(module) in self.units and type(module) is cls:
                    counts[id(module)] = counts.get(id(module), 0) + 1
                    names = self.names[id(module)]
                    values = [point[n] for n in names]
                    call = LayerCall(module, module, self.units[id(module)], counts[id(module)], args, kwargs,
                                     values, [], outputs, names=list(names), tree=self)
                    if not keep:
                        call.args, call.kwargs = _shapes(args), _shapes(kwargs)
                        call.trainable = [_ShapeOnly(np.shape(v)) for v in values]
                        call.outputs = _shapes(outputs)
                    sink.append(call)
                return outputs

            return recording

        try:
            for cls in classes:
                cls.__call__ = wrapper(cls, originals[cls])
            yield
        finally:
            for cls, own in saved.items():
                if own is None:
                    del cls.__call__
                else:
                    cls.__call__ = own

    def capture(self) -> list[LayerCall]:
        """The units' calls with their tensors, through the checked function."""
        calls: list = []
        with self.recording(calls, keep=True):
            self.model.function(_tensors(self.model, self.model.point))
        return _numbered(calls)


def _module_roots(model) -> list:
    """The model file's module-level ``tf.Module`` objects, for a model that
    is a function of them (not Keras): the roots of ``_ModuleTree``."""
    import tensorflow as tf

    if model.kind != "function" or model.module is None:
        return []
    roots: dict = {}
    for name, obj in vars(model.module).items():
        if not name.startswith("_") and isinstance(obj, tf.Module):
            roots.setdefault(id(obj), obj)
    return list(roots.values())


def _numbered(calls: list) -> list:
    """``calls`` with each call's count of its unit and its position (the
    cotangent's seed) set."""
    _count_calls(calls)
    for order, call in enumerate(calls):
        call.order = order
    return calls


def _count_calls(calls: list) -> None:
    totals: dict = {}
    for c in calls:
        totals[c.path] = totals.get(c.path, 0) + 1
    for c in calls:
        c.calls = totals[c.path]


def _weight_names(model, runner) -> dict[int, str]:
    """id of the runner's trainable variable -> the model's weight name: the
    runner's variables are the model's in order (``loading._same_weights``)."""
    variables = list(runner.trainable_variables)
    if len(variables) != len(model.weights):
        return {}
    return {id(v): n for v, n in zip(variables, model.weights)}


def _short(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[1:]) if len(parts) > 2 else path


def _keras_root(model):
    """The user's Keras model object behind ``model``: the layer whose trainable
    variables are the own call's (``loading._keras_model``)."""
    import keras

    own = getattr(model, "own_call", None)
    if own is None:
        return None
    wanted = {id(v) for v in own.variables.values()}
    candidates = list(vars(model.module).values()) if model.module is not None else []
    candidates += [c for c in _closure_values(own.call)]
    for candidate in candidates:
        if isinstance(candidate, keras.layers.Layer) and candidate.built and (
            {id(v) for v in candidate.trainable_variables} == wanted
        ):
            return candidate
    return None


def _closure_values(function, depth: int = 0) -> list:
    """Values a function closes over, a few closures deep (an own call wraps
    the Keras model in a lambda, a loss wraps that lambda)."""
    found = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        found.append(value)
        if callable(value) and depth < 3:
            found += _closure_values(value, depth + 1)
    return found


def _runner(model):
    """The Keras object ``Model.function`` calls: the float64 clone when the
    check runs in float64, else the user's model."""
    runner = _runner_root(model)
    return runner if runner is not None else _keras_root(model)


def _runner_root(model):
    import keras

    root = _keras_root(model)
    if root is None or str(model.dtype) != "float64" or not model.runs_in_float64:
        return None
    for value in _closure_values(model.function):
        if isinstance(value, keras.Model) and value is not root and len(value.trainable_variables) == len(
            root.trainable_variables
        ):
            return value
    return None


# --- memory ----------------------------------------------------------------------


def _require_memory(shapes: list[LayerCall], calls: list[LayerCall], options: CheckOptions) -> None:
    """The memory rule of the module docstring, from the shape pass."""
    from gradcli.memory import dense_bytes, require_memory

    def sizes(call):
        import tensorflow as tf

        inputs = sum(s.size for s in tf.nest.flatten((call.args, call.kwargs)) if isinstance(s, _ShapeOnly))
        weights = sum(s.size for s in call.trainable if isinstance(s, _ShapeOnly))
        outputs = sum(s.size for s in tf.nest.flatten(call.outputs) if isinstance(s, _ShapeOnly))
        return inputs, weights, outputs

    activations = 0
    working = 0
    for call in shapes:
        inputs, _, outputs = sizes(call)
        activations += inputs + outputs
    for call in calls:
        inputs, weights, outputs = sizes(call)
        n = inputs + weights
        if unit_mode(n, 1) == "full":
            working = max(working, dense_bytes(6 * n + 4 * outputs))
        else:
            working = max(working, dense_bytes(FAST_COPIES * options.probes * (n + outputs)))
    require_memory(
        dense_bytes(activations, copies=1) + working,
        f"the layer-by-layer pass ({len(shapes)} layer calls' activations in float64, and the "
        "largest layer's check)",
        "Check the whole model only ({@by_layer} off), or some layers ({@layers} NAME)",
        options.max_memory,
    )


# --- one unit --------------------------------------------------------------------


def _check_call(parent, call: LayerCall, options: CheckOptions, traces: dict) -> LayerResult:
    """One unit call: the quick check through its signature's traces when it
    runs by projections, ``check_model`` when it runs in full or the quick
    check does not settle it (module docstring)."""
    from gradcli.analyses.check import check_model

    started = time.perf_counter()
    layer = call.layer
    result = LayerResult(
        name=layer.name, path=call.path, class_name=type(layer).__name__, call_site=_call_site(layer),
        call_index=call.index, calls=call.calls, weights=0, elements=0, mode="", verdict=PASS,
        failed=False,
    )
    own = dataclasses.replace(
        options, by_layer=False, layers=None, wrt=None, overrides={}, samples=0,
        special=False, keep_blocks=False, order=1, taylor=False,
    )
    try:
        traced = _traced(call, traces)
        local = layer_model(parent, call, options.rng_seed, traced)
        result.weights = sum(int(np.size(local.point[n])) for n in local.wrt if n in call.names)
        result.elements = sum(int(np.size(local.point[n])) for n in local.wrt if n not in call.names)
        own = dataclasses.replace(own, mode=unit_mode(result.weights + result.elements, len(local.outputs)))
        quick = _quick_check(local, traced, own) if own.mode == "fast" and traced is not None else None
        if quick is not None:
            result.mode, result.pairs, result.call_proof, result.notes = "fast", quick[0], quick[1], quick[2]
        else:
            if traced is not None:  # the full machinery: the unit's own call, traced by check_model
                local = layer_model(parent, call, options.rng_seed)
            checked = check_model(local, own)
            tie_note = None
            if _only_kinks(checked):  # the tie rule (module docstring)
                checked, tie_note = _at_broken_ties(parent, call, own, checked, traced)
            result.mode, result.pairs, result.call_proof = checked.mode, checked.pairs, checked.call_proof
            result.notes = [n for n in checked.notes if not n.startswith("promoted ")]
            result.notes += [tie_note] if tie_note else []
            result.failed = checked.failed
            failing = sorted({p.verdict for p in checked.pairs if p.failed})
            if checked.not_the_users_function:
                failing.insert(0, "not the layer's own function")
            result.verdict = ", ".join(failing) if failing else (
                KINK if any(p.verdict == KINK for p in checked.pairs) else PASS
            )
    except GradcliError as exc:
        result.verdict, result.error = LAYER_ERROR, str(exc)
    except Exception as exc:  # noqa: BLE001 - one layer's surprise never loses the pass
        if debugging():
            raise
        result.verdict, result.error = LAYER_ERROR, internal_error_message(exc)
    else:
        result.power = layer_power(result.pairs, {n: int(np.size(v)) for n, v in local.point.items()})
    result.seconds = time.perf_counter() - started
    return result


def layer_power(pairs: list, sizes: dict):
    """The power of a unit's projections as a whole: the weakest of its
    pairs' (the largest single-element error some pair's projections could
    miss), relative to the RMS element of the whole unit's gradient (pooled
    over those pairs, each weighted by its number of elements). Relative to
    each pair's own RMS element instead, a pair whose gradient is zero by
    symmetry (an attention key's bias: softmax ignores it) has an RMS element
    of round-off and a meaningless relative power (1e5 %) that would stand
    for the whole layer."""
    from gradcli.results import Power

    powered = [p for p in pairs if p.power is not None]
    if not powered:
        return None
    weakest = max(powered, key=lambda p: p.power.absolute)
    count = sum(sizes.get(p.input, 1) for p in powered)
    rms = float(np.sqrt(sum(sizes.get(p.input, 1) * p.power.element_size**2 for p in powered) / count))
    return Power(
        absolute=weakest.power.absolute, relative=weakest.power.absolute / rms if rms > 0 else float("inf"),
        element_size=rms, probability=weakest.power.probability, probes=weakest.power.probes,
    )


def _only_kinks(checked) -> bool:
    """Whether every failing pair of a unit's check is a kink whose analytic
    value lies outside the one-sided slopes (``diagnose.refine``), and nothing
    else fails."""
    failing = [p for p in checked.pairs if p.failed]
    return bool(failing) and not checked.not_the_users_function and all(
        p.verdict == KINK for p in failing
    )


def _at_broken_ties(parent, call: LayerCall, options: CheckOptions, checked, traced=None):
    """The tie rule (module docstring): when every failing kink element is an
    input element whose value another element of that input shares exactly (a
    tie), check the unit again with its floating inputs moved off the ties,
    x + TIE_BREAK max(1, |x|) r (r standard normal). (result, note): the kink
    at the captured activations is earned, not a failure, when the unit passes
    there; else the unit fails with that check's pairs. Kinks that are not
    ties leave the result as it is. A unit checked by projections takes them
    there through its signature's trace (``_quick_check``, a pass as strong
    as ``check_model``'s); what that does not settle goes to ``check_model``."""
    from gradcli.analyses.check import check_model
    from gradcli.results import EXPLANATIONS

    structure, leaves, inputs, _ = _call_parts(call)
    values = {name: np.asarray(leaves[i]) for i, name in inputs.items()}
    if any(p.verdict == KINK and p.failed and p.kinks_shared is not True for p in checked.pairs):
        _ordered_tie_break(parent, call, options, checked, values)
    if not _on_ties(checked, values):
        return checked, None
    rng = np.random.default_rng([options.rng_seed, call.order, 2])
    moved = list(leaves)
    for i in inputs:
        moved[i] = moved_off(np.asarray(leaves[i]), rng)
    args, kwargs = _constant_structure(structure, moved)
    nearby = dataclasses.replace(call, args=tuple(args), kwargs=kwargs)
    quick = None
    if traced is not None and options.mode == "fast":
        quick = _quick_check(layer_model(parent, nearby, options.rng_seed, traced), traced, options)
    again = None if quick is not None else check_model(layer_model(parent, nearby, options.rng_seed), options)
    kinks = sum(p.n_kinks for p in checked.pairs if p.verdict == KINK)
    sites = "; ".join(dict.fromkeys(
        k for p in checked.pairs if p.verdict == KINK for k in _kink_sites(p)
    ))
    if again is not None and again.failed:
        again.notes.append(
            f"at the captured activations {kinks} elements sit on kinks ({sites}) where the analytic "
            f"value lies outside the one-sided slopes; with the inputs moved off them "
            f"({MOVED}) the layer fails too: the rows show that check"
        )
        return again, None
    for p in checked.pairs:
        if p.verdict == KINK and p.failed:
            p.failed = False
            p.explanation = (
                f"{EXPLANATIONS[KINK]}; at {p.n_kinks} elements the analytic value lies outside "
                "[left, right], a bound only for an element non-smooth on its own: these are ties of "
                f"several elements ({'; '.join(_kink_sites(p))}), and with the inputs moved off them "
                "the layer passes: not a failure"
            )
            p.warnings.append(
                "the analytic value lies outside the one-sided slopes of single elements, which "
                "bound a subgradient only where one element is non-smooth on its own; with the "
                f"inputs moved off the ties ({MOVED}) the layer passes"
            )
    return checked, (
        f"kink at ties: {kinks} elements sit on kinks shared by several elements ({sites}) at the "
        f"captured activations; moved off them ({MOVED}), the layer passes its "
        f"{'fast' if again is None else again.mode} check: not a failure"
    )


def _ordered_tie_break(parent, call: LayerCall, options: CheckOptions, checked, values: dict) -> None:
    """Evidence that a failing kink at ties is the gradient of one active piece
    (sets ``PairResult.tie_broken_agrees``), for the ties ``diagnose.shared_kinks``
    does not see as shared (its mixed difference moves only the elements it
    examined, and a tied partner may be one it did not).

    Every element of a floating input whose value another element holds is
    moved by ``ORDERED_BREAK max(1, |x|) (1 - i / n)`` (earlier elements end up
    larger), then by the same with the order reversed. Each move breaks every
    tie (checked: the moved values are distinct) and, being so small, leaves
    every other order of the values as it was: the unit is differentiable
    there, and along the move the same piece stays active, so its gradient
    there is a limit of gradients at differentiable points. Where the unit's
    analytic vector-Jacobian product (a fixed cotangent, from ``rng_seed``) at
    the point equals the one at the moved point within the check's tolerance,
    the analytic value at the ties is that piece's gradient (a max pool that
    takes the first maximum of a window agrees with the first order). Whether
    that gradient is right is left to the nearby check of ``_at_broken_ties``.
    Deterministic: no random order, so the verdict is the same in every run."""
    from gradcli.numerics import autodiff

    local = layer_model(parent, call, options.rng_seed)
    names = [n for n in values if n in local.point and np.issubdtype(np.asarray(values[n]).dtype, np.floating)]
    if not names:
        return
    rng = np.random.default_rng([options.rng_seed, call.order, 3])
    cotangents = {o: rng.standard_normal(np.shape(v)) for o, v in local.outputs.items()}
    wrt = [n for n in local.wrt if n in names]

    def product(point):
        found = autodiff.vjp(local.function, point, wrt, cotangents)
        return {n: (None if found[n] is None else np.asarray(found[n], dtype=np.float64)) for n in wrt}

    try:
        here = product(local.point)
        for sign in (1.0, -1.0):
            moved = dict(local.point)
            for name in wrt:
                x = np.asarray(local.point[name])
                flat = x.reshape(-1)
                _, first, counts = np.unique(flat, return_inverse=True, return_counts=True)
                tied = counts[first] > 1
                order = 1.0 - np.arange(flat.size) / flat.size
                step = ORDERED_BREAK * np.maximum(1.0, np.abs(flat)) * (order if sign > 0 else 1.0 - order)
                shifted = np.where(tied, flat + step, flat).astype(x.dtype)
                if np.unique(shifted[tied]).size != int(tied.sum()):
                    return  # the move did not break every tie: no evidence
                moved[name] = shifted.reshape(x.shape)
            there = product(moved)
            tol = checked.tolerance
            if all(
                (here[n] is None) == (there[n] is None)
                and (here[n] is None or np.all(np.abs(here[n] - there[n]) <= tol.atol + tol.rtol * np.abs(here[n])))
                for n in wrt
            ):
                for p in checked.pairs:
                    if p.verdict == KINK and p.failed and p.input in wrt:
                        p.tie_broken_agrees = True
                return
    except Exception:  # noqa: BLE001 - no evidence, the failure stands
        return


def moved_off(x: np.ndarray, rng) -> np.ndarray:
    """``x + TIE_BREAK max(1, |x|) r`` (r standard normal): off the ties and
    exact kinks of the point, in the same region of its range (``TIE_BREAK``)."""
    return x + (TIE_BREAK * np.maximum(1.0, np.abs(x)) * rng.standard_normal(x.shape)).astype(x.dtype)


MOVED = f"x + 2**{int(np.log2(TIE_BREAK))} max(1, |x|) r, r standard normal"


def _on_ties(checked, values: dict) -> bool:
    """Every listed kink outside its slopes is an element of a floating input
    whose value another element of that input holds exactly and whose kink
    other kink elements share (``diagnose.shared_kinks``: where the layer is
    separable in the element, its own slopes bound a subgradient and the
    failure stands), and no pair's kinks were refused by
    ``diagnose.tie_direction`` (moved together, the tied elements show a
    wrong derivative where the layer is differentiable: that is evidence at
    the captured activations, which nearby points do not outweigh)."""
    if any(p.n_tie_refused or (p.verdict == KINK and p.failed and p.kinks_shared is not True
                               and not p.tie_broken_agrees)
           for p in checked.pairs):
        return False  # a kink of one element: its own slopes bound a subgradient (``diagnose.shared_kinks``)
    bad = [(p.input, k) for p in checked.pairs if p.verdict == KINK and p.failed
           for k in p.kinks if not k.subgradient]
    if not bad:
        return False
    for name, kink in bad:
        x = values.get(name)
        if x is None:
            return False  # a weight: the rule moves inputs only
        if np.count_nonzero(x == x[tuple(kink.input_index)]) < 2:
            return False
    return True


def _kink_sites(pair) -> list[str]:
    """The non-smooth ops a kink verdict names (its explanation's parenthesis)."""
    text = pair.explanation or ""
    return [text[text.rfind("(") + 1 : text.rfind(")")]] if "(" in text else []


def _constant_structure(structure, leaves):
    """``tf.nest.pack_sequence_as`` with numpy leaves made tensors."""
    import tensorflow as tf

    filled = [tf.convert_to_tensor(v) if isinstance(v, np.ndarray) else v for v in leaves]
    return tf.nest.pack_sequence_as(structure, filled)


def _quick_check(local, traced: "_Traced", options: CheckOptions):
    """The unit's random projections in one call of its signature's trace
    (module docstring): (pairs, proof, notes) when every pair passes (or is a
    confirmed zero) and the proof finds no other function; None sends the unit
    to ``check_model``."""
    from gradcli.results import ZERO
    from gradcli.verdicts import compare, same_function

    dtype = str(local.dtype)
    if traced.computes_below(local):
        return None
    tol = compare.tolerance(dtype, options.rtol, options.atol)
    fd = _BatchedDifferences(
        local.function, local.point, [PROJECTED], wrt=list(local.wrt), joint=True,
        jit_compile=options.jit_compile, precision=dtype, chunk=options.probes,
        nonsmooth=traced.nonsmooth(local),
    )
    probes = _probes_type()(local, [PROJECTED], fd, tol, options, None)
    try:
        pairs = probes.run_traced(traced)
    except Exception as exc:  # noqa: BLE001 - not traceable, or unsettled: check_model runs it eagerly
        if debugging() and not isinstance(exc, _Unsettled):
            raise
        return None
    compare.apply_fail_on(pairs, options.fail_on)
    if any(p.failed or p.verdict not in (PASS, ZERO) for p in pairs):
        return None
    proof = same_function.prove(local, options.rng_seed, taken=probes.first_vjp)
    if proof is not None and proof.differs:
        return None
    notes = list(local.notes)
    if proof is not None and not proof.proven:
        notes.append(f"not proven to be the user's function: {proof.detail}")
    if options.autodiff == "reverse":
        notes.append("forward mode (JVPs) not checked: autodiff is 'reverse'")
    return pairs, proof, notes


class _Unsettled(Exception):
    """The quick check cannot settle the unit: ``check_model`` will."""


def _probes_type():
    """``_Probes``, made on first use (``analyses.check`` imports this module)."""
    global _PROBES
    if _PROBES is None:
        from gradcli.analyses.check import FastCheck

        class _Probes(FastCheck):
            """``check._FastCheck`` (the same draws, ``project`` and forward-mode
            rule) with every product of the unit taken in one call of its
            signature's trace (``_Traced.probe``): the finite-difference engine
            plans its points first (``_BatchedDifferences``), the call evaluates
            them with the P VJPs and the P JVPs along the joint tangents, and the
            engine then forms its quotients from them."""

            first_vjp = None

            def run_traced(self, traced: "_Traced") -> list:
                model, probes, o = self.model, self.options.probes, PROJECTED
                wrt = list(model.wrt)
                rng = np.random.default_rng(self.options.rng_seed)  # as _FastCheck.run draws
                cotangents = {o: rng.standard_normal((probes,) + model.outputs[o].shape)}
                tangents = {
                    n: rng.standard_normal((probes,) + model.point[n].shape).astype(model.point[n].dtype, copy=False)
                    for n in wrt
                }
                plan = self.fd.plan_passes(wrt, tangents)
                weights, frozen, cots = model.function.bound
                values, jvps, grads = traced.probe(
                    [_constant(model.point[n]) for n in wrt], frozen, cots,
                    [_constant(tangents[n]) for n in wrt], plan, cotangents[o],
                )
                numeric = self.fd.serve(wrt, tangents, values)
                reverse = {o: [dict(zip(wrt, g)) for g in grads]}
                # The first probe's VJP is the proof's (``same_function.prove``'s
                # ``taken``): one backward pass through the trace fewer per unit.
                self.first_vjp = ({o: cotangents[o][0]}, reverse[o][0])
                pairs = [self.project(n, o, tangents[n], cotangents[o], reverse[o], numeric[n]) for n in wrt]
                if any(p.failed for p in pairs) or self.options.autodiff != "both":
                    return pairs
                self.joint = (tuple(wrt), jvps)
                self.check_forward_probes(pairs, tangents, cotangents, numeric, reverse, [o])
                return pairs

            def batched_jvp(self, tangents, outputs):
                """The JVPs along the joint tangents, from the traced call; any
                other set of tangents (inputs probed one by one after a joint
                failure) is ``check_model``'s to take."""
                names, jvps = self.joint
                if tuple(tangents) != names:
                    raise _Unsettled()
                return {PROJECTED: jvps}

        _PROBES = _Probes
    return _PROBES


_PROBES = None


@dataclass
class _BatchedDifferences(FiniteDifferences):
    """``numerics.finite_diff``'s engine, its step rule, Richardson and error
    estimate unchanged, with its points evaluated elsewhere. Along random
    directions with no settling rule, the points of both passes are fixed
    before any value is known, so ``plan_passes`` runs ``along`` once with
    placeholder values to learn them (which input, which signed steps, in
    order), the caller evaluates them all in one call, and ``serve`` runs
    ``along`` again on those values."""

    _planning: object = None
    _served: list | None = None

    def plan_passes(self, wrt, tangents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input index, probe, signed step) of every point, in order."""
        self._planning = []
        for i, n in enumerate(wrt):
            self._input = i
            self.along(n, tangents[n])
        planned, self._planning = self._planning, None
        self.evaluations = 0
        which = np.concatenate([np.full(2 * len(s), i, np.int32) for i, s in planned])
        probe = np.concatenate([np.tile(np.arange(len(s), dtype=np.int32), 2) for _, s in planned])
        signed = np.concatenate([np.concatenate([s, -s]) for _, s in planned])
        self._sizes = [2 * len(s) for _, s in planned]
        return which, probe, signed

    def serve(self, wrt, tangents, values) -> dict:
        """``along`` for every input, on the values of the planned points."""
        values = np.asarray(values).astype(self.point[wrt[0]].dtype)
        self._served = np.split(values, np.cumsum(self._sizes)[:-1])
        try:
            return {n: self.along(n, tangents[n]) for n in wrt}
        finally:
            self._served = None

    def along(self, name: str, directions: np.ndarray, step_scale: float = 1.0):
        """``FiniteDifferences.along`` (its step rule) without embedding the
        directions in the group's vector while planning or serving: the
        points are formed inside the traced call (a conv kernel's embedding
        is tens of megabytes, twice per unit)."""
        if self._planning is None and self._served is None:
            return super().along(name, directions, step_scale)
        h = self.direction_steps({name: directions}, step_scale)
        return self._richardson(self.group(name), "directions", np.empty((len(h), 0)), h)

    def _evaluate_pairs(self, group, kind, part, steps, remaining: int = 0):
        if self._planning is not None:
            self._planning.append((self._input, np.asarray(steps).copy()))
            zeros = np.zeros(len(steps), self.point[group[0]].dtype)
            return {PROJECTED: zeros}, {PROJECTED: zeros}
        if self._served:
            values = self._served.pop(0)
            return {PROJECTED: values[: len(steps)]}, {PROJECTED: values[len(steps):]}
        return super()._evaluate_pairs(group, kind, part, steps, remaining)


class _Traced:
    """The local function of every unit call of one signature (module
    docstring). ``value``: the scalar <c, layer(x, w)> of the floating inputs
    and weights (a list, inputs first), the frozen weights and the cotangents
    c, all arguments of one ``tf.function``, so calls of the same shapes share
    its trace. ``probe``: in one traced call, that scalar at every planned
    finite-difference point, its reverse-mode gradient for each probe's seed,
    and its forward-mode derivative along each probe's joint tangent."""

    def __init__(self, call: LayerCall, structure, leaves, inputs: dict, floating: list):
        import tensorflow as tf

        layer, positions = call.layer, list(inputs)
        count = len(positions)
        output_dtype = tf.nest.flatten(call.outputs)[floating[0]].dtype

        def value(values, frozen, cotangents):
            filled = list(leaves)
            for i, v in zip(positions, values[:count]):
                filled[i] = v
            args, kwargs = tf.nest.pack_sequence_as(structure, filled)
            out, _ = stateless(layer, call.policies, list(values[count:]), list(frozen), *args, **kwargs)
            outs = tf.nest.flatten(out)
            terms = [tf.reduce_sum(tf.cast(c, outs[i].dtype) * outs[i]) for i, c in zip(floating, cotangents)]
            return tf.add_n(terms) if len(terms) > 1 else terms[0]

        def probe(values, frozen, cotangents, tangents, which, probes, signed, seeds):
            def point(i):  # x_m + s u_m for the planned input m, x elsewhere (finite_diff's x + d s)
                moved = [
                    v + tf.cast(tf.equal(which[i], m), v.dtype) * signed[i] * tf.gather(u, probes[i])
                    for m, (v, u) in enumerate(zip(values, tangents))
                ]
                return value(moved, frozen, cotangents)

            def reverse():  # one forward pass, a backward pass per probe's seed
                with tf.GradientTape(persistent=True) as tape:
                    tape.watch(values)
                    y = value(values, frozen, cotangents)
                rows = []
                for p in range(seeds.shape[0]):
                    rows.append(autodiff.reverse(tape, y, values, output_gradients=tf.cast(seeds[p], y.dtype)))
                return rows

            def forward(p):
                with autodiff.forward_accumulator(values, [tf.gather(u, p) for u in tangents]) as acc:
                    y = value(values, frozen, cotangents)
                return acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)

            k = tf.shape(seeds)[0]
            points = tf.map_fn(point, tf.range(tf.shape(signed)[0]), fn_output_signature=output_dtype)
            jvps = tf.map_fn(forward, tf.range(k), fn_output_signature=output_dtype)
            grads = reverse()
            return points, jvps, grads

        # A layer without weights shares one signature across shapes
        # (``_signature``): the second shape retraces with those dimensions
        # left open, and every later shape reuses that trace.
        self.value = tf.function(value, autograph=False, reduce_retracing=True)
        self._probe = tf.function(probe, autograph=False, reduce_retracing=True)
        self.users = 0
        self.coarser: bool | None = None
        self._nonsmooth: bool | None = None

    def probe(self, values, frozen, cotangents, tangents, plan, seeds):
        """(f at the planned points, JVPs [probes], per probe the gradient of
        each value or None) as numpy."""
        from gradcli.numerics.autodiff import FORWARD_MODE

        which, probes, signed = plan
        with FORWARD_MODE:  # its trace takes forward-mode products (numerics.autodiff)
            points, jvps, grads = self._probe(
                values, frozen, cotangents, tangents, _constant(which), _constant(probes),
                _constant(signed), _constant(seeds),
            )
        return (np.asarray(points), np.asarray(jvps),
                [[None if g is None else np.asarray(g) for g in row] for row in grads])

    def function(self, weights: list, frozen: list, cotangents: list):
        """``Model.function`` of one unit call: its frozen weights and
        cotangents bound, the differentiated names in ``weights`` order."""
        def function(values: dict) -> dict:
            args = [_constant(values[n]) for n in weights]
            return {PROJECTED: self.value(args, frozen, cotangents)}

        function.bound = (weights, frozen, cotangents)
        return function

    def nonsmooth(self, local) -> bool:
        """Whether the traced local function holds a non-smooth op (the step
        rule of its probes, ``finite_diff.dense_step_size``); read once per
        signature, from the trace already made."""
        from gradcli.verdicts.excuses import has_nonsmooth_op

        if self._nonsmooth is None:
            weights, frozen, cotangents = local.function.bound
            values = [_constant(local.point[n]) for n in weights]
            self._nonsmooth = has_nonsmooth_op(self.value.get_concrete_function(values, frozen, cotangents).graph)
        return self._nonsmooth

    def computes_below(self, local) -> bool:
        """Whether a floating tensor on the forward path from the
        differentiated values to the output of the traced local function is
        coarser than the point's dtype (constants and shapes beside the path do
        not count, as in ``ModelGraph.precision``): then ``check_model``'s
        precision rule sets the tolerances, not the quick check. Read once per
        signature, from the trace already made."""
        from gradcli.numerics.finite_diff import machine_eps

        if self.coarser is None:
            weights, frozen, cotangents = local.function.bound
            values = [_constant(local.point[n]) for n in weights]
            graph = self.value.get_concrete_function(values, frozen, cotangents).graph
            finest = machine_eps(local.dtype)
            stack = [t for t in graph.inputs[: len(values)]]
            seen, self.coarser = set(), False
            while stack and not self.coarser:
                tensor = stack.pop()
                if tensor.ref() in seen:
                    continue
                seen.add(tensor.ref())
                if tensor.dtype.is_floating and machine_eps(tensor.dtype.name) > finest:
                    self.coarser = True
                stack.extend(out for op in tensor.consumers() for out in op.outputs)
        return self.coarser


def _constant(value):
    import tensorflow as tf

    return tf.convert_to_tensor(value)


def _traced(call: LayerCall, traces: dict) -> _Traced | None:
    """The ``_Traced`` of the call's signature (module docstring), made on the
    first call of that signature; None for a call it cannot serve (no
    floating output)."""
    import tensorflow as tf

    structure, leaves, inputs, floating = _call_parts(call)
    if not floating or call.tree is not None:  # a tf.Module has no stateless call to share
        return None
    key = _signature(call, structure, leaves, inputs)
    traced = traces.get(key)
    if traced is None:
        traced = traces[key] = _Traced(call, structure, leaves, inputs, floating)
    traced.users += 1
    return traced


def _call_parts(call: LayerCall):
    """(structure, leaves, {leaf index: input name}, floating output positions)."""
    import tensorflow as tf

    structure = (list(call.args), _accepted(call.layer, call.kwargs))
    leaves = tf.nest.flatten(structure)
    names = _argument_names(call.layer, call.args, structure[1])
    inputs = {i: names[i] for i, leaf in enumerate(leaves) if _floating_tensor(leaf)}
    floating = [i for i, t in enumerate(tf.nest.flatten(call.outputs)) if _floating_tensor(t)]
    return structure, leaves, inputs, floating


def _signature(call: LayerCall, structure=None, leaves=None, inputs=None):
    """What makes two unit calls one local function (module docstring): the
    layer's class and configuration (its name aside), the structure of the
    call's arguments with their shapes and dtypes (and the values of those that
    are not floating tensors), and the shapes and dtypes of its weights and
    outputs. A layer whose configuration cannot be read is its own signature."""
    import json

    import tensorflow as tf

    if structure is None:
        structure, leaves, inputs, _ = _call_parts(call)
    layer = call.layer
    try:
        config = dict(layer.get_config())
        config.pop("name", None)
        config = json.dumps(config, sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 - no configuration to compare: no sharing
        return ("layer", id(layer))

    # A layer without weights computes the same function of any shape (an
    # activation, an add): only the ranks of its tensors count, and its trace
    # leaves the other dimensions open (``_Traced``). The proof of each call
    # (``verdicts.same_function``) still compares it with the layer's own call.
    weightless = not call.trainable and not call.non_trainable

    def dims(shape):
        return len(shape) if weightless else shape

    def describe(leaf, floating):
        shape = tuple(getattr(leaf, "shape", ()))
        if floating or isinstance(leaf, _ShapeOnly):
            return ("float", dims(shape), str(getattr(leaf, "dtype", "")))
        if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
            return ("tensor", shape, str(leaf.dtype), hash(np.asarray(leaf).tobytes()))
        return ("value", repr(leaf))

    def shapes(values):
        return tuple((tuple(getattr(v, "shape", ())), str(getattr(v, "dtype", ""))) for v in values)

    return (
        type(layer), config, repr(tf.nest.map_structure(lambda _: None, structure)),
        tuple(describe(leaf, i in inputs) for i, leaf in enumerate(leaves)),
        shapes(call.trainable), shapes(call.non_trainable),
        tuple((dims(tuple(getattr(v, "shape", ()))), str(getattr(v, "dtype", "")))
              for v in tf.nest.flatten(call.outputs)),
    )


def layer_model(parent, call: LayerCall, seed: int = 0, traced: _Traced | None = None):
    """The unit's local function as a ``Model``: floating tensors of the call
    (inputs) and the unit's trainable weights -> <c, its outputs> (module
    docstring). With ``traced``, the function is the signature's traced one;
    else the unit's layer is called eagerly (``check_model`` traces it itself,
    and its culprit search reads the ops of that trace)."""
    import tensorflow as tf

    from gradcli.model.calling import OwnCall
    from gradcli.model.loading import Model, host_array

    layer, own, tree = call.layer, call.own, call.tree
    structure, leaves, inputs, floating = _call_parts(call)
    if not floating:
        raise GradcliError(f"layer {call.path} has no floating-point output to differentiate")
    point = {inputs[i]: np.asarray(leaves[i]) for i in inputs}
    weights = list(call.names)
    point.update({n: np.asarray(v) for n, v in zip(weights, call.trainable)})
    frozen = list(call.non_trainable)

    def rebuild(values):
        filled = [values[inputs[i]] if i in inputs else leaf for i, leaf in enumerate(leaves)]
        args, kwargs = tf.nest.pack_sequence_as(structure, filled)
        return args, kwargs

    outputs = tf.nest.flatten(call.outputs)
    rng = np.random.default_rng([seed, call.order])
    cotangents = [rng.standard_normal(tuple(outputs[i].shape)) for i in floating]
    norm = np.sqrt(sum(float(np.sum(c * c)) for c in cotangents)) or 1.0
    cotangents = [c / norm for c in cotangents]  # a unit vector (module docstring)

    def project(out) -> dict:
        """<c, output>: the layer's floating outputs contracted with the cotangents."""
        leaves = tf.nest.flatten(out)
        terms = [tf.reduce_sum(tf.cast(c, leaves[i].dtype) * leaves[i]) for i, c in zip(floating, cotangents)]
        return {PROJECTED: tf.add_n(terms) if len(terms) > 1 else terms[0]}

    wrt = list(inputs.values()) + weights
    if traced is not None:
        function = traced.function(wrt, [tf.convert_to_tensor(f) for f in frozen],
                                   [tf.constant(c) for c in cotangents])
    elif tree is not None:
        # A tf.Module: its weights substituted as the whole model's are
        # (``model.variables``), its ``__call__``'s Python body run.
        substitute, body = tree.weights.only(weights), _call_method(layer)

        def function(values: dict) -> dict:
            args, kwargs = rebuild(values)
            with substitute.substituted(values):
                return project(body(layer, *args, **kwargs))
    else:
        def function(values: dict) -> dict:
            args, kwargs = rebuild(values)
            out, _ = stateless(layer, call.policies, [values[n] for n in weights], frozen, *args, **kwargs)
            return project(out)

    own_call = None
    if own is not None:
        def own_function(data: dict) -> dict:
            args, kwargs = rebuild(data)
            return project(own(*args, **kwargs))

        own_variables = (
            [tree.weights.slots[n][2] for n in weights] if tree is not None else own.trainable_variables
        )
        own_call = OwnCall(
            call=own_function,
            variables=dict(zip(weights, own_variables)),
            description=f"{own.name}({', '.join(inputs.values())})",
        )
    native = {n: np.dtype("float32") for n in point}
    if own is not None:
        native.update({n: np.dtype(getattr(v.dtype, "as_numpy_dtype", v.dtype)) for n, v in zip(weights, own_variables)})
    local = Model(
        name=f"{parent.name} :: {call.path}", path=parent.path, function=function, point=point,
        wrt=wrt, native_dtypes=native, kind="keras",
        module=parent.module, weights=weights, own_call=own_call,
    )
    local.outputs = {n: host_array(t) for n, t in function(_tensors(local, point)).items()}
    if own_call is None:
        local.notes.append("the user's own layer could not be paired with the checked one")
    return local


def _accepted(layer, kwargs: dict) -> dict:
    """The keyword arguments the layer's ``call`` takes: ``Layer.__call__``
    drops ``training`` and ``mask`` for a ``call`` without them, and
    ``stateless_call`` passes its keywords to ``call`` as they are."""
    try:
        parameters = inspect.signature(_call_method(layer)).parameters.values()
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return dict(kwargs)
    names = {p.name for p in parameters}
    return {k: v for k, v in kwargs.items() if k in names}


def _argument_names(layer, args, kwargs) -> list[str]:
    """A name per leaf of (args, kwargs): the parameter names of the layer's
    ``call`` (``inputs``, ``query``...), ``NAME_i`` inside a list."""
    import tensorflow as tf

    try:
        parameters = [
            p.name for p in inspect.signature(_call_method(layer)).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ][1:]
    except (TypeError, ValueError):
        parameters = []
    names = []
    for i, arg in enumerate(args):
        base = parameters[i] if i < len(parameters) else f"arg{i}"
        leaves = tf.nest.flatten(arg)
        names += [base] if len(leaves) == 1 and not isinstance(arg, (list, tuple, dict)) else [
            f"{base}_{j}" for j in range(len(leaves))
        ]
    for key in sorted(kwargs):  # tf.nest orders a dict's leaves by key
        leaves = tf.nest.flatten(kwargs[key])
        names += [key] if len(leaves) == 1 and not isinstance(kwargs[key], (list, tuple, dict)) else [
            f"{key}_{j}" for j in range(len(leaves))
        ]
    return names


def _call_method(layer):
    """The Python function a unit's call runs: a Keras layer's ``call``, a
    tf.Module's ``__call__`` (the body of a ``tf.function`` one)."""
    import keras

    method = getattr(type(layer), "call" if isinstance(layer, keras.layers.Layer) else "__call__", None)
    return getattr(method, "python_function", method)


def _call_site(layer) -> str:
    """``file:line`` of the ``def call`` of the layer's class."""
    from gradcli.model.paths import relative_path

    function = _call_method(layer)
    code = getattr(function, "__code__", None)
    if code is None or not os.path.isfile(code.co_filename):
        return ""
    try:
        lines, start = inspect.getsourcelines(function)
        offset = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
    except (OSError, TypeError, StopIteration):
        start, offset = code.co_firstlineno, 0
    return f"{relative_path(code.co_filename)}:{start + offset}"
