"""The local functions of the unit calls and their traces: a unit's
*signature* (``signature``: its class and configuration, the structure,
shapes and dtypes of its call's arguments, weights and outputs; ranks only
for a layer without weights), one ``Traced`` per signature shared by every
call of it (``traced_of``), and what a call's arguments are (``call_parts``,
``call_method``, ``call_site``). The package docstring gives the rules and
the reasons (tracing, not arithmetic, is what a layer's check costs).
"""

from __future__ import annotations

import inspect
import os

import numpy as np

from gradcli.analyses.layers.units import PROJECTED, LayerCall, ShapeOnly, floating_tensor
from gradcli.model.keras_float64 import stateless
from gradcli.numerics import autodiff


class Traced:
    """The local function of every unit call of one signature (module
    docstring). ``value``: the scalar <c, layer(x, w)> of the floating inputs
    and weights (a list, inputs first), the frozen weights and the cotangents
    c, all arguments of one ``tf.function``, so calls of the same shapes share
    its trace. ``probe``: that scalar at every planned finite-difference point
    (one traced call, ``points``), then its reverse-mode gradient for each
    probe's seed and its forward-mode derivative along each probe's joint
    tangent (another). The points are evaluated one an iteration or,
    ``batched``, one input's at a time in batches (``batched_points``): a
    trace that costs more to make (pfor converts the layer once per input)
    and less to run."""

    def __init__(self, call: LayerCall, structure, leaves, inputs: dict, floating: list, batched: bool = False):
        import tensorflow as tf

        layer, positions = call.layer, list(inputs)
        count = len(positions)
        context = mask_context(call)
        # The elements a point holds besides its moved input: the call's
        # floating inputs and outputs, POINT_ACTIVATION_COPIES times.
        activations = POINT_ACTIVATION_COPIES * sum(
            int(np.prod(t.shape)) for t in [*(leaves[i] for i in positions), *tf.nest.flatten(call.outputs)]
            if getattr(t, "dtype", None) is not None and t.dtype.is_floating)
        output_dtype = tf.nest.flatten(call.outputs)[floating[0]].dtype

        def value(values, frozen, cotangents):
            # Each call its own tensors (``autodiff.fresh``): a library's cache
            # keyed by the input tensor never answers for an earlier call.
            values, frozen = autodiff.fresh(values), autodiff.fresh(frozen)
            filled = list(leaves)
            for i, v in zip(positions, values[:count]):
                filled[i] = v
            args, kwargs = tf.nest.pack_sequence_as(structure, with_masks(filled, call.input_masks))
            out, _ = stateless(layer, call.policies, list(values[count:]), list(frozen), *args, **kwargs)
            # In the captured output's dtype (the check's, ``capture.in_dtype``)
            # whatever the layer computes in: the map_fns of ``probe`` and ``batched_points`` declare it.
            return tf.cast(contracted(layer, out, args, context, floating, cotangents), output_dtype)

        def evaluated(values, frozen, cotangents, tangents, which, probes, signed):
            # f at x_m + s u_m[p] for each planned (input m, probe p, signed
            # step s) (finite_diff's x + d s): a point moves its one input only.
            if not batched:
                # One point an iteration, each input's move a branch taken for
                # that input alone: a point of a transformer layer (17 inputs)
                # then costs its one input's arithmetic, where every input
                # moved masked took 17 times as much.
                def point(i):
                    moved = [
                        tf.cond(tf.equal(which[i], m), lambda v=v, u=u: v + signed[i] * tf.gather(u, probes[i]),
                                lambda v=v: v)
                        for m, (v, u) in enumerate(zip(values, tangents))
                    ]
                    return value(moved, frozen, cotangents)

                return tf.map_fn(point, tf.range(tf.shape(signed)[0]), fn_output_signature=output_dtype)
            where, parts = [], []
            for m, (v, u) in enumerate(zip(values, tangents)):  # the points of one input at a time
                def moved_point(probe_and_step, m=m, v=v, u=u):
                    p, s = probe_and_step
                    moved = list(values)
                    moved[m] = v + s * tf.gather(u, p)
                    return value(moved, frozen, cotangents)

                at = tf.reshape(tf.cast(tf.where(tf.equal(which, m)), tf.int32), [-1])
                where.append(at)
                parts.append(batched_points(moved_point, tf.gather(probes, at), tf.gather(signed, at),
                                            tf.size(v, out_type=tf.int32) + activations, output_dtype))
            return tf.dynamic_stitch(where, parts)

        def products(values, frozen, cotangents, tangents, seeds):
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
                return autodiff.forward(acc, y, zeros=True)

            jvps = tf.map_fn(forward, tf.range(tf.shape(seeds)[0]), fn_output_signature=output_dtype)
            return jvps, reverse()

        # A layer without weights shares one signature across shapes
        # (``signature``): the second shape retraces with those dimensions
        # left open, and every later shape reuses that trace.
        self.value = tf.function(value, autograph=False, reduce_retracing=True)
        # The points (each input's batches converted by pfor, 5-6 s of a
        # BERT-base layer's trace) are a call of their own, traced once with
        # the plan's length left open (``points``): the round-off retry's
        # shorter plans run the program the first call made. Inside
        # ``products``' trace, a retry's call made a second program of them
        # (2.1 s of a GPT-2 small layer's first retry).
        self._points = tf.function(evaluated, autograph=False, reduce_retracing=True)
        self._products = tf.function(products, autograph=False, reduce_retracing=True)
        self.batched = batched
        self.users = 0
        self.coarser: bool | None = None
        self._nonsmooth: bool | None = None
        self._custom: bool | None = None

    def probe(self, values, frozen, cotangents, tangents, plan, seeds):
        """(f at the planned points, JVPs [probes], per probe the gradient of
        each value or None) as numpy: the points in one call (``points``), the
        products in another."""
        points = self.points(values, frozen, cotangents, tangents, plan)
        jvps, grads = self._products(values, frozen, cotangents, tangents, constant_tensor(seeds))
        return (points, np.asarray(jvps),
                [[None if g is None else np.asarray(g) for g in row] for row in grads])

    def points(self, values, frozen, cotangents, tangents, plan):
        """f at the planned points alone, as numpy (the round-off retry's
        points, without ``probe``'s VJPs and JVPs): one call of the points'
        program, whatever the plan's length; nothing runs for an empty plan."""
        import tensorflow as tf

        plan = [constant_tensor(p) for p in plan]
        if int(plan[2].shape[0]) == 0:
            return np.zeros(0, plan[2].dtype.as_numpy_dtype)
        open_length = [tf.TensorSpec([None], p.dtype) for p in plan]
        program = self._points.get_concrete_function(values, frozen, cotangents, tangents, *open_length)
        return np.asarray(program(values, frozen, cotangents, tangents, *plan))

    def function(self, weights: list, frozen: list, cotangents: list):
        """``Model.function`` of one unit call: its frozen weights and
        cotangents bound, the differentiated names in ``weights`` order."""
        def function(values: dict) -> dict:
            args = [constant_tensor(values[n]) for n in weights]
            return {PROJECTED: self.value(args, frozen, cotangents)}

        function.bound = (weights, frozen, cotangents)
        return function

    def graph(self, local):
        """The graph of the local function at the unit's shapes: the trace
        already made, looked up by the shapes and dtypes of the point (no
        copy of its values)."""
        import tensorflow as tf

        weights, frozen, cotangents = local.function.bound
        specs = [tf.TensorSpec(np.shape(local.point[n]), np.asarray(local.point[n]).dtype) for n in weights]
        return self.value.get_concrete_function(specs, frozen, cotangents).graph

    def nonsmooth(self, local) -> bool:
        """Whether the traced local function holds a non-smooth op (the step
        rule of its probes, ``finite_diff.dense_step_size``); read once per
        signature, from the trace already made."""
        from gradcli.verdicts.excuses import has_nonsmooth_op

        if self._nonsmooth is None:
            self._nonsmooth = has_nonsmooth_op(self.graph(local))
        return self._nonsmooth

    def custom_gradients(self, local) -> bool:
        """Whether the traced local function holds a ``tf.custom_gradient``
        (``verdicts.graph.holds_custom_gradient``): its forward mode can differ
        between an eager accumulator and one inside a trace, and the quick
        check takes only the latter. Read once per signature, from the trace
        already made."""
        from gradcli.verdicts.graph import holds_custom_gradient

        if self._custom is None:
            self._custom = holds_custom_gradient(self.graph(local))
        return self._custom

    def computes_below(self, local) -> bool:
        """Whether a floating or complex tensor on the forward path from the
        differentiated values to the output of the traced local function is
        coarser than the point's dtype (complex64 as float32) (constants and shapes beside the path do
        not count, as in ``ModelGraph.precision``): then ``check_model``'s
        precision rule sets the tolerances, not the quick check. Read once per
        signature, from the trace already made."""
        from gradcli.numerics.finite_diff import machine_eps
        from gradcli.verdicts.graph_ops import carries, precision_dtype

        if self.coarser is None:
            graph = self.graph(local)
            finest = machine_eps(local.dtype)
            stack = [t for t in graph.inputs[: len(local.function.bound[0])]]
            seen, self.coarser = set(), False
            while stack and not self.coarser:
                tensor = stack.pop()
                if tensor.ref() in seen:
                    continue
                seen.add(tensor.ref())
                if carries(tensor) and machine_eps(precision_dtype(tensor.dtype)) > finest:
                    self.coarser = True
                stack.extend(out for op in tensor.consumers() for out in op.outputs)
        return self.coarser


def contracted(layer, out, args, context: tuple, floating: list, cotangents: list, own: bool = False):
    """<c, the unit's outputs>: its floating outputs (at the ``floating``
    positions of the flattened ``out``) with the first cotangents, and the
    Keras masks it emits (``emitted_masks``; ``args``: the call's positional
    arguments, ``context``: its ``mask_context``) with the rest, when there
    are more. A mask is an output of the unit, read by the layers after it
    (an LSTM skips the steps it masks): it enters as its 0/1 values,
    piecewise constant, so its derivative is 0 and it moves the scalar only
    where a step flips it. There the unit's output jumps, as the whole
    model's does: the ladder reads the jump (``verdicts.kink``), where
    without it the unit's floating output alone (Masking's, equal to x on a
    padded step) has derivative 1 against TensorFlow's 0, the gradient of
    the piece the mask selects."""
    import tensorflow as tf

    outs = tf.nest.flatten(out)
    terms = [tf.reduce_sum(tf.cast(c, outs[i].dtype) * outs[i]) for i, c in zip(floating, cotangents)]
    if len(cotangents) > len(floating):
        dtype = outs[floating[0]].dtype
        masks = emitted_masks(layer, out, args[0] if args else None, context, own)
        terms += [tf.reduce_sum(tf.cast(c, dtype) * tf.cast(tf.cast(m, tf.bool), dtype))
                  for m, c in zip(masks, cotangents[len(floating):])]
    return tf.add_n(terms) if len(terms) > 1 else terms[0]


def mask_context(call: LayerCall) -> tuple:
    """(previous, passed) of a unit call, read from its capture (a call may
    delete the masks its arguments carry: Keras' MultiHeadAttention does):
    the previous mask ``Layer.__call__`` hands ``compute_mask`` (the ``mask``
    argument, else the masks its first argument carried) and the ids of every
    mask that came in (``capture.input_masks``, the ``mask`` argument): a
    mask emitted as it came in is passed through, an input of the unit."""
    import tensorflow as tf

    given = call.kwargs.get("mask") if isinstance(call.kwargs, dict) else None
    previous = given
    if previous is None and call.args and call.input_masks:
        first = tf.nest.flatten(call.args[0])
        carried = call.input_masks[: len(first)]
        if any(m is not None for m in carried):
            previous = tf.nest.pack_sequence_as(call.args[0], carried)
    passed = {id(m) for m in call.input_masks if m is not None}
    passed |= {id(m) for m in tf.nest.flatten(given) if m is not None}
    return previous, passed


def with_masks(leaves: list, masks: list) -> list:
    """``leaves`` (a unit call's argument leaves, the checked values in place)
    with the Keras mask each carried in the model's call set on it again
    (``capture.input_masks``): a layer reads a mask there as well as from its
    mask arguments (Keras' MultiHeadAttention takes the query's from the
    query)."""
    for leaf, mask in zip(leaves, masks):
        if mask is not None and hasattr(leaf, "dtype") and not isinstance(leaf, np.ndarray):
            try:
                leaf._keras_mask = mask
            except AttributeError:  # a value that takes no attribute: no mask to read
                pass
    return leaves


def emitted_masks(layer, out, first, context: tuple, own: bool = False) -> list:
    """The Keras masks a unit's call emits with its outputs, as
    ``Layer.__call__`` attaches them: the masks its ``call`` set (Masking's),
    else, for a layer that supports masking, ``compute_mask(first argument,
    previous mask)`` (``context``: ``mask_context``), less those passed
    through as they came in. ``own``: ``out`` is ``Layer.__call__``'s own
    output, which carries them already."""
    import tensorflow as tf

    previous, passed = context
    masks = [getattr(t, "_keras_mask", None) for t in tf.nest.flatten(out)]
    if not own and not all(m is not None for m in masks):
        masks = []
        if getattr(layer, "supports_masking", False) and first is not None:
            try:
                masks = tf.nest.flatten(layer.compute_mask(first, previous))
            except Exception:  # noqa: BLE001 - no mask the layer can compute: none emitted
                masks = []
    return [m for m in masks if m is not None and id(m) not in passed]


#: Points of one input evaluated in one batch (``batched_points``) hold at
#: most this many elements (128 MB of float64): their moved input and,
#: per point, POINT_ACTIVATION_COPIES copies of the call's activations. A
#: BERT-base transformer layer's 204 points took 1.53 s one by one (each a
#: ``tf.cond`` per input) and 0.65 s batched per input: a batch computes once
#: what does not depend on its input (the attention before a feed-forward
#: kernel), and multiplies one stacked activation by a kernel where the point
#: moves the activation. A point's own arithmetic is unchanged; its rounding
#: may differ in the last bits, within the differences' round-off estimate.
POINT_BATCH_ELEMENTS = 16 * 2**20
POINT_ACTIVATION_COPIES = 8


def batched_points(point, probes, signed, elements, dtype):
    """``point((probe, signed step))`` for each planned point of one input,
    ``tf.vectorized_map`` over batches of at most ``POINT_BATCH_ELEMENTS //
    elements`` points (``elements``: a point's own, its moved input's and its
    activations'), as even as they divide; where pfor cannot batch an op it
    runs that op in a loop (``fallback_to_while_loop``)."""
    import tensorflow as tf

    count = tf.size(signed)

    def evaluated():  # count > 0
        most = tf.maximum(1, POINT_BATCH_ELEMENTS // tf.maximum(1, elements))
        batches = (count + most - 1) // most
        size = (count + batches - 1) // batches
        padding = [[0, batches * size - count]]  # zero steps: f at the point itself, dropped below
        planned = (tf.reshape(tf.pad(probes, padding), [-1, size]), tf.reshape(tf.pad(signed, padding), [-1, size]))
        values = tf.map_fn(lambda batch: tf.vectorized_map(point, batch, warn=False), planned,
                           fn_output_signature=tf.TensorSpec([None], dtype))
        return tf.reshape(values, [-1])[:count]

    # An input with no planned point (another input's round-off retry) runs nothing.
    return tf.cond(count > 0, evaluated, lambda: tf.zeros([0], dtype))


def constant_tensor(value):
    import tensorflow as tf

    return tf.convert_to_tensor(value)


def traced_of(call: LayerCall, traces: dict, batched: bool = False) -> Traced | None:
    """The ``Traced`` of the call's signature (the package docstring), made on the
    first call of that signature (``batched``: its points evaluated in batches,
    ``plan.batched_units``); None for a call it cannot serve (no floating
    output)."""
    import tensorflow as tf

    structure, leaves, inputs, floating = call_parts(call)
    if not floating or call.tree is not None:  # a tf.Module has no stateless call to share
        return None
    key = signature(call, structure, leaves, inputs)
    traced = traces.get(key)
    if traced is None:
        traced = traces[key] = Traced(call, structure, leaves, inputs, floating, batched)
    traced.users += 1
    return traced


def call_parts(call: LayerCall):
    """(structure, leaves, {leaf index: input name}, floating output positions)."""
    import tensorflow as tf

    structure = (list(call.args), accepted_kwargs(call.layer, call.kwargs))
    leaves = tf.nest.flatten(structure)
    names = _argument_names(call.layer, call.args, structure[1])
    inputs = {i: names[i] for i, leaf in enumerate(leaves) if floating_tensor(leaf)}
    floating = [i for i, t in enumerate(tf.nest.flatten(call.outputs)) if floating_tensor(t)]
    return structure, leaves, inputs, floating


def signature(call: LayerCall, structure=None, leaves=None, inputs=None):
    """What makes two unit calls one local function (the package docstring): the
    layer's class and configuration (its name aside), the structure of the
    call's arguments with their shapes and dtypes (and the values of those that
    are not floating tensors), and the shapes and dtypes of its weights and
    outputs. A layer whose configuration cannot be read is its own signature."""
    import json

    import tensorflow as tf

    if structure is None:
        structure, leaves, inputs, _ = call_parts(call)
    layer = call.layer
    try:
        config = dict(layer.get_config())
        config.pop("name", None)
        config = json.dumps(config, sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 - no configuration to compare: no sharing
        return ("layer", id(layer))

    # A layer without weights computes the same function of any shape (an
    # activation, an add): only the ranks of its tensors count, and its trace
    # leaves the other dimensions open (``Traced``). The proof of each call
    # (``verdicts.same_function``) still compares it with the layer's own call.
    weightless = not call.trainable and not call.non_trainable

    def dims(shape):
        return len(shape) if weightless else shape

    def describe(leaf, floating):
        shape = tuple(getattr(leaf, "shape", ()))
        if floating or isinstance(leaf, ShapeOnly):
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
        # The masks the arguments carry (``with_masks``), by value: the trace
        # sets them on its arguments.
        tuple(None if m is None else (tuple(m.shape), hash(np.asarray(m).tobytes())) for m in call.input_masks),
    )


def accepted_kwargs(layer, kwargs: dict) -> dict:
    """The keyword arguments the layer's ``call`` takes: ``Layer.__call__``
    drops ``training`` and ``mask`` for a ``call`` without them, and
    ``stateless_call`` passes its keywords to ``call`` as they are."""
    try:
        parameters = inspect.signature(call_method(layer)).parameters.values()
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
            p.name for p in inspect.signature(call_method(layer)).parameters.values()
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


def call_method(layer):
    """The Python function a unit's call runs: a Keras layer's ``call``, a
    tf.Module's ``__call__`` (the body of a ``tf.function`` one)."""
    import keras

    method = getattr(type(layer), "call" if isinstance(layer, keras.layers.Layer) else "__call__", None)
    return getattr(method, "python_function", method)


def call_site(layer) -> str:
    """``file:line`` of the ``def call`` of the layer's class."""
    from gradcli.model.paths import relative_path

    function = call_method(layer)
    code = getattr(function, "__code__", None)
    if code is None or not os.path.isfile(code.co_filename):
        return ""
    try:
        lines, start = inspect.getsourcelines(function)
        offset = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
    except (OSError, TypeError, StopIteration):
        start, offset = code.co_firstlineno, 0
    return f"{relative_path(code.co_filename)}:{start + offset}"
