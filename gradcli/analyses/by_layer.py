"""Check a Keras model layer by layer: where in a large network a gradient is wrong.

A full check costs one finite difference per weight and a fast check gives one
verdict for the whole model. This pass runs the model once, captures what
reaches each layer, and checks every layer *locally*: its output as a function
of its floating inputs and its trainable weights, at the captured activations,
with ``analyses.check.check_model`` (both autodiff modes, the culprit search,
the same verdict rules). A layer that fails is named with its class, its path
in the model and the line of its ``call``; its pairs name the weight or input
element and the op (or ``tf.custom_gradient``) at fault.

Which layers (``layer_units``): the model tree is walked from the root through
every ``keras.Model`` (functional, Sequential, subclassed, nested models); every
layer that is not a model is one unit and is checked whole, its sublayers with
it (``MultiHeadAttention`` with its projections, a user's residual block with
its ops). Ops a model applies between its layers (a functional ``x + y``, a
subclassed model's own arithmetic) belong to no unit: the whole-model check
covers them. A layer called more than once (a shared layer) is checked at
*every* call site, since each call sees other activations (a gradient wrong on
part of the input range may be hit at one site only); the rows say which call.

How activations are captured (``_record``): ``keras.layers.Layer.__call__`` is
wrapped for the duration of one forward pass of ``Model.function`` (the float64
clone the check runs) and, to pair each unit with the user's own layer, one of
``Model.own_call`` (the user's model in its own dtypes). The wrapper records
the arguments of every unit's call (outermost only), the values its variables
hold in that call, and its outputs.

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
label)`` after each unit; before the first, the pass is estimated at
``SECONDS_PER_UNIT`` per unit plus ``FORWARD_MULTIPLE`` forward passes of the
model (the evaluations and products of the local checks sum to a few forward
passes), from the timed capture pass; the result's note gives the estimate
and the time taken. Both constants come from ``bench/layer_speed.py``.
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
from gradcli.options import CheckOptions
from gradcli.results import PASS
from gradcli.results.by_layer import LAYER_ERROR, LayerResult

#: Full check of a unit up to this many differentiated elements: its first pass
#: is one traced batch of 2 n evaluations (``check.JOINT_LIMIT``).
FULL_ELEMENTS = 2048
#: The one output of a unit's local function: <c, layer output>.
PROJECTED = "output_dot_c"
#: Fast mode keeps about this many copies of a unit's inputs and outputs per
#: probe (the +-h points of two Richardson levels, tangents and cotangents).
FAST_COPIES = 6
#: Estimate up front: seconds per unit (traces, the proof, the culprit-free
#: path of ``check_model``) and forward passes of the model for the work that
#: grows with the layer's size. Calibrated on bench/layer_speed.py.
SECONDS_PER_UNIT = 0.35
FORWARD_MULTIPLE = 40.0


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


def wants_layers(model, options: CheckOptions, mode: str) -> bool:
    """Whether ``check_model`` runs the pass: forced by ``by_layer`` or
    ``layers``, else in auto mode when auto chose the fast check (a full check
    does not fit the budget), for Keras models."""
    if model.kind != "keras" or options.by_layer is False:
        return False
    if options.by_layer or options.layers:
        return True
    return options.mode == "auto" and mode == "fast"


def check_layers(model, options: CheckOptions) -> tuple[list[LayerResult], list[str]]:
    """The layer-by-layer pass of ``model`` (a Keras ``Model``): one result per
    checked unit call, failures first, and notes for the model's report."""
    from gradcli.progress import report

    root = _keras_root(model)
    if root is None:
        return [], ["layer-by-layer pass not run: the Keras model object could not be found"]
    import keras

    if not isinstance(root, keras.Model):
        return [], ["layer-by-layer pass not run: the model is a single layer (the whole-model check is its check)"]
    started = time.perf_counter()
    shapes, forward_seconds = _shape_pass(model)
    calls = [c for c in shapes if _selected(c, options.layers)]
    if options.layers and not calls:
        known = ", ".join(dict.fromkeys(c.path for c in shapes))
        raise UsageError(f"match no layer (layers: {known[:400]})", param="layers", bad_value=True)
    _require_memory(shapes, calls, options)
    estimate = len(calls) * SECONDS_PER_UNIT + FORWARD_MULTIPLE * forward_seconds * len(calls) / max(len(shapes), 1)
    report("layers", 0, len(calls), f"estimated {estimate:.0f} s")
    captured = _capture(model, root)
    wanted = {(c.path, c.index) for c in calls}
    results = []
    for done, call in enumerate((c for c in captured if (c.path, c.index) in wanted), start=1):
        results.append(_check_call(model, call, options))
        report("layers", done, len(calls), call.path)
    results.sort(key=lambda r: (not r.failed, r.verdict != LAYER_ERROR))
    seconds = time.perf_counter() - started
    full = sum(r.mode == "full" for r in results)
    fast = sum(r.mode == "fast" for r in results)
    notes = [
        f"layer by layer: {len(results)} layer calls checked ({full} in full, {fast} by random "
        f"projections) in {seconds:.1f} s (estimated {estimate:.0f} s up front)"
    ]
    errors = [r for r in results if r.verdict == LAYER_ERROR]
    if errors:
        notes.append(f"{len(errors)} layer calls could not be checked on their own: see the layer table")
    return results, notes


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
    into ``sink`` (``keep``: with its tensors; else shapes only)."""
    import keras

    original = keras.layers.Layer.__call__
    counts: dict[int, int] = {}

    def recording(self, *args, **kwargs):
        if id(self) not in units or getattr(_recording, "inside", False):
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


def _shape_pass(model) -> tuple[list[LayerCall], float]:
    """The units' calls with shapes only (nothing held), and the seconds of one
    forward pass of the checked function."""
    runner = _runner(model)
    sink: list = []
    started = time.perf_counter()
    with _record(layer_units(runner), sink, keep=False):
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
    _count_calls(clone_calls)
    for order, call in enumerate(clone_calls):
        call.order = order
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
    for i, call in enumerate(clone_calls):
        call.own = own_calls[i].layer if pairs else None
        call.names = [names.get(id(v), _short(v.path)) for v in call.layer.trainable_variables]
    return clone_calls


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


def _check_call(parent, call: LayerCall, options: CheckOptions) -> LayerResult:
    """Build the unit's ``Model`` and run ``check_model`` on it."""
    from gradcli.analyses.check import check_model

    started = time.perf_counter()
    layer = call.layer
    result = LayerResult(
        name=layer.name, path=call.path, class_name=type(layer).__name__, call_site=_call_site(layer),
        call_index=call.index, calls=call.calls, weights=0, elements=0, mode="", verdict=PASS,
        failed=False,
    )
    try:
        local = layer_model(parent, call, options.rng_seed)
        result.weights = sum(int(np.size(local.point[n])) for n in local.wrt if n in call.names)
        result.elements = sum(int(np.size(local.point[n])) for n in local.wrt if n not in call.names)
        outputs = sum(int(np.size(v)) for v in local.outputs.values())
        mode = unit_mode(result.weights + result.elements, outputs)
        own = dataclasses.replace(
            options, mode=mode, by_layer=False, layers=None, wrt=None, overrides={}, samples=0,
            special=False, keep_blocks=False, order=1, taylor=False,
        )
        checked = check_model(local, own)
    except GradcliError as exc:
        result.verdict, result.error = LAYER_ERROR, str(exc)
    except Exception as exc:  # noqa: BLE001 - one layer's surprise never loses the pass
        if debugging():
            raise
        result.verdict, result.error = LAYER_ERROR, internal_error_message(exc)
    else:
        result.mode, result.pairs, result.call_proof = checked.mode, checked.pairs, checked.call_proof
        result.notes = [n for n in checked.notes if not n.startswith("promoted ")]
        result.failed = checked.failed
        failing = sorted({p.verdict for p in checked.pairs if p.failed})
        if checked.not_the_users_function:
            failing.insert(0, "not the layer's own function")
        result.verdict = ", ".join(failing) if failing else PASS
        powers = [p.power for p in checked.pairs if p.power is not None]
        result.power = max(powers, key=lambda p: p.relative, default=None)
    result.seconds = time.perf_counter() - started
    return result


def layer_model(parent, call: LayerCall, seed: int = 0):
    """The unit's local function as a ``Model``: floating tensors of the call
    (inputs) and the unit's trainable weights -> its outputs (module docstring)."""
    import tensorflow as tf

    from gradcli.model.calling import OwnCall
    from gradcli.model.loading import Model, host_array

    layer, own = call.layer, call.own
    structure = (list(call.args), _accepted(layer, call.kwargs))
    leaves = tf.nest.flatten(structure)
    names = _argument_names(layer, call.args, structure[1])
    inputs = {i: names[i] for i, leaf in enumerate(leaves) if _floating_tensor(leaf)}
    point = {inputs[i]: np.asarray(leaves[i]) for i in inputs}
    weights = list(call.names)
    point.update({n: np.asarray(v) for n, v in zip(weights, call.trainable)})
    frozen = list(call.non_trainable)

    def rebuild(values):
        filled = [values[inputs[i]] if i in inputs else leaf for i, leaf in enumerate(leaves)]
        args, kwargs = tf.nest.pack_sequence_as(structure, filled)
        return args, kwargs

    floating = [i for i, t in enumerate(tf.nest.flatten(call.outputs)) if _floating_tensor(t)]
    rng = np.random.default_rng([seed, call.order])
    cotangents = [rng.standard_normal(tuple(tf.nest.flatten(call.outputs)[i].shape)) for i in floating]
    norm = np.sqrt(sum(float(np.sum(c * c)) for c in cotangents)) or 1.0
    cotangents = [c / norm for c in cotangents]  # a unit vector (module docstring)

    def project(out) -> dict:
        """<c, output>: the layer's floating outputs contracted with the cotangents."""
        leaves = tf.nest.flatten(out)
        if not floating:
            raise GradcliError(f"layer {call.path} has no floating-point output to differentiate")
        terms = [tf.reduce_sum(tf.cast(c, leaves[i].dtype) * leaves[i]) for i, c in zip(floating, cotangents)]
        return {PROJECTED: tf.add_n(terms) if len(terms) > 1 else terms[0]}

    def function(values: dict) -> dict:
        args, kwargs = rebuild(values)
        out, _ = layer.stateless_call([values[n] for n in weights], frozen, *args, **kwargs)
        return project(out)

    own_call = None
    if own is not None:
        def own_function(data: dict) -> dict:
            args, kwargs = rebuild(data)
            return project(own(*args, **kwargs))

        own_call = OwnCall(
            call=own_function,
            variables=dict(zip(weights, own.trainable_variables)),
            description=f"{own.name}({', '.join(inputs.values())})",
        )
    native = {n: np.dtype("float32") for n in point}
    if own is not None:
        native.update({n: np.dtype(v.dtype) for n, v in zip(weights, own.trainable_variables)})
    local = Model(
        name=f"{parent.name} :: {call.path}", path=parent.path, function=function, point=point,
        wrt=list(inputs.values()) + weights, native_dtypes=native, kind="keras",
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
        parameters = inspect.signature(type(layer).call).parameters.values()
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
            p.name for p in inspect.signature(type(layer).call).parameters.values()
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


def _call_site(layer) -> str:
    """``file:line`` of the ``def call`` of the layer's class."""
    from gradcli.model.paths import relative_path

    function = getattr(type(layer), "call", None)
    code = getattr(function, "__code__", None)
    if code is None or not os.path.isfile(code.co_filename):
        return ""
    try:
        lines, start = inspect.getsourcelines(function)
        offset = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
    except (OSError, TypeError, StopIteration):
        start, offset = code.co_firstlineno, 0
    return f"{relative_path(code.co_filename)}:{start + offset}"
