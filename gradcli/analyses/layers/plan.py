"""The layer pass's plan, before any layer is checked (``plan_layers``):
whether the pass runs (``wants_layers``), the shape pass, ``layers``'
selection, the memory guard (``require_layer_memory``: the captured
activations plus the largest unit's working set, the package docstring's
rule) and the estimate up front (``_estimate``:
``SECONDS_PER_SIGNATURE`` per signature of the fast units,
``SECONDS_PER_UNIT`` per fast unit, ``SECONDS_PER_FULL_UNIT`` per full unit,
plus ``FORWARD_MULTIPLE`` forward passes of the model). Each refusal comes
before any work.
"""

from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass, field

from gradcli.analyses.layers.capture import ModuleTree, shape_pass
from gradcli.analyses.layers.traces import signature
from gradcli.analyses.layers.units import LayerCall, ShapeOnly, keras_root, module_roots, unit_mode
from gradcli.errors import UsageError
from gradcli.options import CheckOptions

#: Fast mode keeps about this many copies of a unit's inputs and outputs per
#: probe (the +-h points of two Richardson levels, tangents and cotangents),
#: each counted once: this is the count of copies. Measured on keras-hub's
#: BERT-base token embedding (23.4M weights in float64, 3 probes): the unit's
#: quick check peaked 2.9 GB over the loaded model, against 6 x 3 x 0.19 GB =
#: 3.4 GB predicted. (Counted ``memory.COPIES`` times more, as the guard did
#: before, it predicted 13.5 GB and refused BERT-base by default.)
FAST_COPIES = 6
#: Estimate up front (``_estimate``), calibrated on bench/layer_speed.py:
#: seconds per signature of the fast units (one trace of ``Traced.value`` and
#: one of ``Traced.probe``, and the first backward function of the proof),
#: per fast unit (one traced call, the proof's eager call of the user's layer,
#: the comparisons), per full unit (``check_model``), and forward passes of the
#: model for the arithmetic that grows with the layers' size. Recalibrated on
#: ResNet-50 (the sixteenth round of bench/README.md), whose pass of 25.9 s
#: was estimated at 52 s: a signature's first unit took 0.19 s (median; mean
#: 0.22 s, 21 signatures with repeats) more than the later units of its
#: signature, against 0.5 s counted; its 24 full units 0.11 s each, against
#: 0.25 s.
SECONDS_PER_SIGNATURE = 0.25
SECONDS_PER_UNIT = 0.05
SECONDS_PER_FULL_UNIT = 0.12
FORWARD_MULTIPLE = 40.0
#: ... and, for a unit whose own arithmetic is large, its evaluations: the
#: quick check evaluates the unit at 2 steps x 2 levels per probe of each of
#: its floating inputs and weights, and takes a VJP and a JVP per probe (about
#: QUICK_PRODUCT_CALLS calls' worth), each costing about the unit's own eager
#: call in the shape pass; and a signature's traces cost about TRACE_CALLS of
#: those calls (TensorFlow runs the unit's Python once per trace, and the
#: probe's trace holds the unit several times over). Measured on keras-hub's
#: BertBackbone at BERT-base's shapes: a transformer layer (17 floating
#: inputs, 7.1M weights) took 7.7-8.5 s a call after the first, whose traces
#: took 10 s more; FORWARD_MULTIPLE alone estimated the pass of 19 units at
#: 39 s, and it took 201 s.
QUICK_PRODUCT_CALLS = 4
TRACE_CALLS = 100
#: ... or, for a unit of many elements and little arithmetic (an embedding
#: table: a gather), its elements: each probe draws, moves, differentiates and
#: compares every element in numpy and in the traced call. Measured on
#: BERT-base's token embedding (23.4M weights, 3 probes, the joint check
#: running beside): 19.4 s, 0.28 microseconds an element a probe, where its
#: eager call of 2.2 ms counted 0.05 s; since its draws are one block, never
#: copied (the fifteenth round), 8.4-9.6 s: 0.12-0.14 microseconds. (A
#: ResNet-50 3x3 kernel of 2.36M weights took 0.04-0.07.)
SECONDS_PER_ELEMENT = 0.13e-6
#: A signature's points are evaluated in batches (``traces.batched_points``)
#: when its fast units' points, one by one at their eager call's seconds in
#: the shape pass, are predicted to take at least this long: batching halves
#: the points' time of a BERT-base transformer layer (3.3 -> 1.5 s a layer
#: after the first) but its trace and first call cost about 7 s more, and a
#: ResNet-50's 40 signatures of small units took 45 s batched against 35 s.
BATCHED_MIN_SECONDS = 20.0
#: ... and the estimate counts a batched signature's points at
#: BATCHED_POINT_SHARE of their one-by-one seconds and its traces at
#: BATCHED_TRACE_CALLS of its calls (BERT-base's transformer layers: their
#: points 54 s one by one at the shape pass's 22 ms a call, a layer after the
#: first 1.5 s where it took 3.3 s, the first about 7 s more).
BATCHED_POINT_SHARE = 0.45
BATCHED_TRACE_CALLS = 400


def wants_layers(model, options: CheckOptions, mode: str) -> bool:
    """Whether ``check_model`` runs the pass: forced by ``by_layer`` or
    ``layers``, else in auto mode when auto chose the fast check (a full check
    does not fit the budget), for Keras models and networks of tf.Modules."""
    if options.by_layer is False or not (model.kind == "keras" or module_roots(model)):
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
    activations: int = 0  # bytes of the captured activations (``require_layer_memory``)
    unit_memory: dict = field(default_factory=dict)  # (path, index) -> bytes of that unit's check
    batched: set = field(default_factory=set)  # (path, index) of the units whose points run batched

    def memory(self, key) -> int:
        """The pass's predicted bytes while unit ``key`` is checked."""
        return self.activations + self.unit_memory.get(key, 0)


def plan_layers(model, options: CheckOptions) -> LayerPlan:
    """The pass's first steps, each a refusal before any work (``check_model``
    runs this before the whole-model check): find the Keras model, the shape
    pass, ``layers``' selection (a usage error when it matches nothing), the
    memory guard and the estimate."""
    root = keras_root(model)
    if root is None and model.kind == "keras":
        return LayerPlan(skipped="layer-by-layer pass not run: the Keras model object could not be found")
    if root is None:
        root = ModuleTree(model)
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
    shapes, forward_seconds = shape_pass(model, root)
    if not shapes:  # the checked function called none of them through ``Layer.__call__``
        return LayerPlan(skipped=(
            "layer-by-layer pass not run: the checked function called none of the model's layers "
            "(the whole-model check is its check)"
        ))
    calls = [c for c in shapes if _selected(c, options.layers)]
    if options.layers and not calls:
        known = ", ".join(dict.fromkeys(c.path for c in shapes))
        raise UsageError(f"match no layer (layers: {known[:400]})", param="layers", bad_value=True)
    activations, unit_memory = require_layer_memory(shapes, calls, options)
    batched = batched_units(calls, options.probes)
    estimate = _estimate(calls, forward_seconds * len(calls) / max(len(shapes), 1), options.probes, batched)
    return LayerPlan(root=root, calls=calls, estimate=estimate, seconds=time.perf_counter() - started,
                     activations=activations, unit_memory=unit_memory, batched=batched)


def batched_units(calls: list[LayerCall], probes: int) -> set:
    """(path, index) of the fast units whose signature's points run batched
    (``BATCHED_MIN_SECONDS``)."""
    seconds, units = {}, {}
    for call in calls:
        shapes = _fast_shapes(call)
        if shapes is not None:
            key = planned_signature(call)
            seconds[key] = seconds.get(key, 0.0) + _point_evaluations(shapes, probes) * call.seconds
            units.setdefault(key, []).append((call.path, call.index))
    return {unit for key, keys in units.items() if seconds[key] >= BATCHED_MIN_SECONDS for unit in keys}


def _fast_shapes(call: LayerCall) -> list | None:
    """The shapes of a fast unit's floating inputs and weights; None for a full unit."""
    import tensorflow as tf

    shapes = [s for s in tf.nest.flatten((call.args, call.kwargs, call.trainable)) if isinstance(s, ShapeOnly)]
    return None if unit_mode(sum(s.size for s in shapes)) == "full" else shapes


def _point_evaluations(shapes: list, probes: int) -> int:
    """The quick check's finite-difference points: 2 steps x 2 levels per probe of each input."""
    return 2 * 2 * probes * len(shapes)


def _estimate(calls: list[LayerCall], forward_seconds: float, probes: int, batched: set = frozenset()) -> float:
    """Seconds predicted for the pass (the package docstring), from the shape
    pass: the constants' terms, and each fast unit's evaluations at its own
    eager call's seconds (``QUICK_PRODUCT_CALLS``, ``TRACE_CALLS``; a
    ``batched`` unit's at ``BATCHED_POINT_SHARE`` and ``BATCHED_TRACE_CALLS``)
    or its elements (``SECONDS_PER_ELEMENT``), where those are more than the
    constants say (a unit whose arithmetic, or whose table, is large)."""
    signatures, full, arithmetic = {}, 0, 0.0
    for call in calls:
        shapes = _fast_shapes(call)
        if shapes is None:
            full += 1
            continue
        key, together = planned_signature(call), (call.path, call.index) in batched
        traces = (BATCHED_TRACE_CALLS if together else TRACE_CALLS) * call.seconds
        signatures[key] = max(SECONDS_PER_SIGNATURE, traces, signatures.get(key, 0.0))
        points = _point_evaluations(shapes, probes) * (BATCHED_POINT_SHARE if together else 1.0)
        evaluations = points + QUICK_PRODUCT_CALLS * probes
        elements = probes * sum(s.size for s in shapes)
        arithmetic += max(SECONDS_PER_UNIT, evaluations * call.seconds, SECONDS_PER_ELEMENT * elements)
    return (sum(signatures.values()) + arithmetic + full * SECONDS_PER_FULL_UNIT
            + FORWARD_MULTIPLE * forward_seconds)


def _selected(call: LayerCall, patterns) -> bool:
    """``layers``: a name, a path, a path's tail or a glob of any of them."""
    if not patterns:
        return True
    name = call.path.rsplit("/", 1)[-1]
    tails = {call.path, name, call.path.split("/", 1)[-1]}
    return any(fnmatch.fnmatchcase(t, p) for p in patterns for t in tails)


def require_layer_memory(shapes: list[LayerCall], calls: list[LayerCall], options: CheckOptions
                         ) -> tuple[int, dict]:
    """The memory rule of the package docstring, from the shape pass: once the
    captured activations and the largest unit's working set fit, (the
    activations' bytes, each unit's working set by (path, index))."""
    from gradcli.memory import dense_bytes, require_memory

    def sizes(call):
        import tensorflow as tf

        inputs = sum(s.size for s in tf.nest.flatten((call.args, call.kwargs)) if isinstance(s, ShapeOnly))
        weights = sum(s.size for s in call.trainable if isinstance(s, ShapeOnly))
        outputs = sum(s.size for s in tf.nest.flatten(call.outputs) if isinstance(s, ShapeOnly))
        return inputs, weights, outputs

    activations = 0
    for call in shapes:
        inputs, _, outputs = sizes(call)
        activations += inputs + outputs
    working = {}
    for call in calls:
        inputs, weights, outputs = sizes(call)
        n = inputs + weights
        if unit_mode(n, 1) == "full":
            working[call.path, call.index] = dense_bytes(6 * n + 4 * outputs)
        else:
            working[call.path, call.index] = dense_bytes(FAST_COPIES * options.probes * (n + outputs), copies=1)
    activations = dense_bytes(activations, copies=1)
    require_memory(
        activations + max(working.values(), default=0),
        f"the layer-by-layer pass ({len(shapes)} layer calls' activations in float64, and the "
        "largest layer's check)",
        "Check the whole model only ({@by_layer=false}), or some layers ({@layers} NAME)",
        options.max_memory,
    )
    return activations, working


def planned_signature(call):
    """``traces.signature`` of a planned call, or the call as its own
    signature where that cannot be read: the estimate and the pass's kept
    draws (``analyses.layers.run``) need a key, not the reason."""
    try:
        return signature(call)
    except Exception:  # noqa: BLE001 - its own signature
        return id(call)
