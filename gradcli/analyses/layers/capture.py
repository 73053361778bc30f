"""How activations are captured (the package docstring): ``Layer.__call__``
(or a tf.Module unit's class's ``__call__``) wrapped for one forward pass,
recording the arguments, weights and outputs of every unit's outermost call;
first with shapes only (``shape_pass``, nothing held), then with its tensors
(``capture_calls``, ``ModuleTree.capture``), each clone's call paired with the
same call of the user's own layer. Only calls made on the capturing thread
are recorded: the whole-model check beside the pass calls the same layers.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import numpy as np

from gradcli.analyses.layers.units import (
    LayerCall,
    ShapeOnly,
    closure_values,
    floating_tensor,
    layer_units,
    module_roots,
    point_tensors,
    runner_of,
)
from gradcli.analyses.layers.traces import accepted_kwargs, call_method, emitted_masks, mask_context
from gradcli.model.core import weight_name, weight_names


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
        # Before the call: a call may take the masks off its inputs (Keras'
        # MultiHeadAttention reads the query's and deletes it).
        given = with_input_masks(self, args, kwargs) if keep else kwargs
        masks = input_masks(self, args, given) if keep else []
        started = time.perf_counter()
        try:
            outputs = original(self, *args, **kwargs)
            seconds = time.perf_counter() - started  # the call's own eager time (the plan's estimate)
            trainable = [v.value for v in self.trainable_variables]
            frozen = [v.value for v in self.non_trainable_variables]
        finally:
            _recording.inside = False
        counts[id(self)] = counts.get(id(self), 0) + 1
        if keep:
            call = LayerCall(self, None, units[id(self)], counts[id(self)], args, given,
                             trainable, frozen, outputs, input_masks=masks)
            # Before ``in_dtype`` casts the outputs (a cast tensor has no mask).
            call.emitted = [tuple(m.shape) for m in emitted_masks(self, outputs, None, mask_context(call), own=True)]
            sink.append(call)
        else:
            sink.append(LayerCall(self, None, units[id(self)], counts[id(self)], _shapes(args),
                                  _shapes(kwargs), _shapes(trainable), [], _shapes(outputs), seconds=seconds))
        return outputs

    keras.layers.Layer.__call__ = recording
    try:
        yield
    finally:
        keras.layers.Layer.__call__ = original
        _recording.inside = False


def with_input_masks(layer, args: tuple, kwargs: dict) -> dict:
    """``kwargs`` with the mask arguments ``Layer.__call__`` fills in from its
    inputs' Keras masks, as it passes them to ``call``: ``mask`` for a call of
    one tensor argument, ``NAME_mask`` beside each tensor argument ``NAME``
    of several (a ``MultiHeadAttention``'s ``query_mask``), where the call
    takes it, was not given it and the input carries a mask. A unit is
    checked as the model called it: an LSTM after a ``Masking`` skips the
    padded steps, and its local function (a mask stays as captured) skips
    them too, where without the mask it computed them."""
    import inspect

    import tensorflow as tf

    try:
        signature = inspect.signature(call_method(layer))
        parameters, bound = signature.parameters, signature.bind_partial(layer, *args, **kwargs).arguments
    except (TypeError, ValueError):
        return kwargs

    def tensors(value) -> bool:
        leaves = tf.nest.flatten(value)
        return bool(leaves) and all(hasattr(t, "dtype") and hasattr(t, "shape") for t in leaves)

    def mask_of(value):
        masks = tf.nest.map_structure(lambda t: getattr(t, "_keras_mask", None), value)
        return masks if any(m is not None for m in tf.nest.flatten(masks)) else None

    names = [n for n in list(bound)[1:] if tensors(bound[n])]
    wanted = {"mask": names[0]} if len(names) == 1 else {f"{n}_mask": n for n in names}
    added = {
        argument: mask for argument, source in wanted.items()
        if argument in parameters and bound.get(argument) is None
        and (mask := mask_of(bound[source])) is not None
    }
    return {**kwargs, **added} if added else kwargs


def input_masks(layer, args: tuple, kwargs: dict) -> list:
    """The Keras mask each leaf of the call's arguments carried (None where
    none), in the order of ``traces.call_parts``' leaves; [] when none did.
    The local function puts them back on the checked values
    (``traces.with_masks``): a layer may read them there rather than from its
    mask arguments (MultiHeadAttention's query mask)."""
    import tensorflow as tf

    masks = [getattr(t, "_keras_mask", None) for t in tf.nest.flatten((list(args), accepted_kwargs(layer, kwargs)))]
    return masks if any(m is not None for m in masks) else []


def _shapes(structure):
    """Floating tensors as their shapes (``ShapeOnly``), the rest dropped."""
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda t: ShapeOnly(tuple(t.shape)) if floating_tensor(t) else None, structure
    )


def shape_pass(model, root) -> tuple[list[LayerCall], float]:
    """The units' calls with shapes only (nothing held), and the seconds of one
    forward pass of the checked function."""
    sink: list = []
    recording = root.recording(sink, keep=False) if isinstance(root, ModuleTree) else _record(
        layer_units(runner_of(model)), sink, keep=False
    )
    started = time.perf_counter()
    with recording:
        model.function(point_tensors(model, model.point))
    seconds = time.perf_counter() - started
    count_calls(sink)
    return sink, seconds


def capture_calls(model, root) -> list[LayerCall]:
    """The units' calls with their tensors, through the checked function (the
    float64 clone), each paired with the same call of the user's own layer."""
    runner = runner_of(model)
    clone_calls: list = []
    with _record(layer_units(runner), clone_calls, keep=True):
        model.function(point_tensors(model, model.point))
    numbered(clone_calls)
    own_calls: list = []
    own = model.own_call
    if own is not None:
        data = {
            n: np.asarray(v).astype(model.native_dtypes.get(n, np.asarray(v).dtype))
            for n, v in model.point.items() if n not in model.weights
        }
        try:
            with _record(layer_units(root), own_calls, keep=False):
                own.call(point_tensors(model, data))
        except Exception:  # noqa: BLE001 - no pairing: every layer's proof says so
            own_calls = []
    pairs = len(own_calls) == len(clone_calls) and all(
        (a.path, a.index, type(a.layer).__name__) == (b.path, b.index, type(b.layer).__name__)
        for a, b in zip(clone_calls, own_calls)
    )
    names = _weight_names(model, runner)
    float64 = model.runs_in_float64 and str(model.dtype) == "float64"
    policies = model.float64_by_policies and float64
    for i, call in enumerate(clone_calls):
        if float64:
            in_dtype(call, "float64")
        call.policies = policies
        call.own = own_calls[i].layer if pairs else None
        call.names = [names.get(id(v), weight_name(v.path)) for v in call.layer.trainable_variables]
    return clone_calls


class ModuleTree:
    """The units of a model made of ``tf.Module`` objects (the package docstring):
    every module below the model file's module-level tf.Modules, and a
    module-level one itself when it holds no other (a leaf the model function
    calls) and is not the model itself."""

    def __init__(self, model):
        import tensorflow as tf

        from gradcli.model.variables import find_weights, objects_by_path, variables_by_path

        self.model, self.weights = model, find_weights(model.module)
        # The model's weights only: one it cannot vary stays as it is (``Model.unvaried``).
        names = {id(v): n for n, (_, _, v) in self.weights.slots.items() if n in model.weights}
        self.units: dict[int, str] = {}
        self.modules: dict[int, object] = {}
        self.names: dict[int, list] = {}
        own = model.own_call
        targets = {id(v) for v in closure_values(own.call)} if own is not None else set()
        for root in module_roots(model):
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
                started = time.perf_counter()
                outputs = plain(module, *args, **kwargs)
                seconds = time.perf_counter() - started
                if id(module) in self.units and type(module) is cls:
                    counts[id(module)] = counts.get(id(module), 0) + 1
                    names = self.names[id(module)]
                    values = [point[n] for n in names]
                    call = LayerCall(module, module, self.units[id(module)], counts[id(module)], args, kwargs,
                                     values, [], outputs, names=list(names), tree=self, seconds=seconds)
                    if not keep:
                        call.args, call.kwargs = _shapes(args), _shapes(kwargs)
                        call.trainable = [ShapeOnly(np.shape(v)) for v in values]
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
            self.model.function(point_tensors(self.model, self.model.point))
        return numbered(calls)


def in_dtype(call: LayerCall, dtype: str) -> None:
    """Every floating tensor of ``call`` (its arguments, weights, frozen
    weights and outputs) in ``dtype``, the check's: a unit is checked in one
    dtype, whatever reached it. What a layer receives is recorded before
    ``Layer.__call__`` casts it to the layer's compute dtype, and its local
    function calls ``call`` itself (``stateless_call``), which casts nothing:
    a float32 activation (a model's ``Input(dtype="float32")``, a layer that
    computes in float32) met a float64 kernel there, and a weight or frozen
    weight the layer keeps in float32 whatever its policy (a layer norm that
    creates its scale as float32, a frozen table) met float64 activations."""
    import tensorflow as tf

    def cast(value):
        if floating_tensor(value) and str(getattr(value.dtype, "name", value.dtype)) != dtype:
            return tf.cast(value, dtype)
        return value

    call.args = tf.nest.map_structure(cast, tuple(call.args))
    call.kwargs = tf.nest.map_structure(cast, call.kwargs)
    call.trainable = [cast(v) for v in call.trainable]
    call.non_trainable = [cast(v) for v in call.non_trainable]
    call.outputs = tf.nest.map_structure(cast, call.outputs)


def numbered(calls: list) -> list:
    """``calls`` with each call's count of its unit and its position (the
    cotangent's seed) set."""
    count_calls(calls)
    for order, call in enumerate(calls):
        call.order = order
    return calls


def count_calls(calls: list) -> None:
    totals: dict = {}
    for c in calls:
        totals[c.path] = totals.get(c.path, 0) + 1
    for c in calls:
        c.calls = totals[c.path]


def _weight_names(model, runner) -> dict[int, str]:
    """id of the runner's trainable variable -> the model's weight name: the
    runner's variables are the model's in order (``loading._same_weights``);
    else the names the one naming rule gives them (``core.weight_names``)."""
    variables = list(runner.trainable_variables)
    if len(variables) == len(model.weights):
        names = list(model.weights)
    else:
        names = weight_names([v.path for v in variables])
    return {id(v): n for v, n in zip(variables, names)}
