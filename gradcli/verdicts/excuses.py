"""What earns an excuse: the graph evidence behind ``surrogate`` and ``kink``.

A comparison that fails is excused only by something the traced graph
(``graph.TracedGraph``, such as ``culprit.ModelGraph``) shows on the path from
the input to the output, never by the finite differences alone:

* **A straight-through estimator** (``straight_through``) earns ``surrogate``.
  It is a construction, one of:

  - a quantizing op whose registered gradient is a straight-through one by
    design (``graph_ops.SURROGATE_OPS``: ``FakeQuant*``,
    ``QuantizeAndDequantize*``), or a quantizing op (``QUANTIZING_OPS``) whose
    gradient is overridden (``gradient_override_map``);
  - ``x + tf.stop_gradient(q(x) - x)``: a ``StopGradient`` of a difference
    between a value quantized from the input and a term ``t`` with no quantizer
    in it, whose output is added (``ADDING_OPS``) back to that same ``t``, which
    carries the input without a cut (the identity path); ops that only move or
    cast data (``PASS_THROUGH_OPS``) may sit in between. A stop_gradient of a
    quantized value that is not added back to its own identity term is no
    estimator (``sg(round(x)) * 0.5 + g(x)``);
  - a ``tf.custom_gradient`` whose forward code (the ops between its arguments
    and its results) contains a quantizing op.

  Why: a surrogate is a gradient chosen on purpose where the true derivative is
  zero. TensorFlow op bugs (an overwritten ``tensor_scatter_nd_update`` or
  ``dynamic_stitch`` entry gets the gradient of the value that replaced it)
  look the same to finite differences, so only the construction tells them
  apart. ``gradient_beside`` then checks that the construction explains the
  elements: with every construction's result held constant
  (``tf.gradients(..., stop_gradients=...)``, the true derivative of a
  piecewise-constant quantizer), the gradient left at a locally-constant element
  must be zero; a gradient left there comes from some other op, and the element
  is a ``mismatch``.

* **A non-smooth op** (``nonsmooth``) earns ``kink``, together with one-sided
  slopes that differ beyond their own error estimates (``diagnose``). The ops
  are ``NONSMOOTH_OPS`` (written once, here), any op that turns a floating
  value reached from the input into an integer or bool (a comparison feeding a
  ``tf.where``, an ``argmax``, a cast to an integer), the ops inside a called
  function (``tf.function`` not inlined, ``while_loop`` and ``cond`` bodies),
  and ``OPAQUE_OPS`` (Python code TensorFlow cannot see into, which may hold
  anything). Why: an ill-conditioned smooth function (``cos(1e7 x)``, a value
  next to a pole) can give one-sided slopes that disagree at every step the
  ladder reaches; without a non-smooth op nothing there can be a kink.

Both return ``None`` when the model's graph cannot be traced: no evidence can
be shown, and ``diagnose`` then excuses nothing (``inconclusive``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.numerics.autodiff import graph_gradients
from gradcli.results import GraphSite
from gradcli.verdicts.graph_ops import SURROGATE_OPS, ancestors, carries, custom_result_count, describe

#: Ops whose output is piecewise constant in their floating input.
QUANTIZING_OPS = frozenset({"Round", "Rint", "Floor", "Ceil", "Sign", *SURROGATE_OPS})
#: Ops that add their operands: what joins a stop_gradient to the identity path.
ADDING_OPS = frozenset({"Add", "AddV2", "AddN", "Sub", "BiasAdd"})
#: Ops that only move, reshape or re-type data on the way to the adding op.
PASS_THROUGH_OPS = frozenset({"Identity", "IdentityN", "Cast", "Reshape", "ExpandDims", "Squeeze"})
#: Ops that are not smooth functions of their floating inputs everywhere (a
#: kink, a tie, a branch, a jump), with what makes them so.
NONSMOOTH_OPS = {
    "Relu": "relu (kink at 0)",
    "Relu6": "relu6 (kinks at 0 and 6)",
    "LeakyRelu": "leaky relu (kink at 0)",
    "Elu": "elu (kink at 0 unless alpha = 1)",
    "Selu": "selu (kink at 0)",
    "Abs": "abs (kink at 0)",
    "Maximum": "maximum (kink at a tie)",
    "Minimum": "minimum (kink at a tie)",
    "Max": "reduce_max (kink at a tie)",
    "Min": "reduce_min (kink at a tie)",
    "SegmentMax": "segment_max (kink at a tie)",
    "SegmentMin": "segment_min (kink at a tie)",
    "UnsortedSegmentMax": "unsorted_segment_max (kink at a tie)",
    "UnsortedSegmentMin": "unsorted_segment_min (kink at a tie)",
    "MaxPool": "max_pool (kink at a tie)",
    "MaxPoolV2": "max_pool (kink at a tie)",
    "MaxPool3D": "max_pool3d (kink at a tie)",
    "MaxPoolWithArgmax": "max_pool_with_argmax (kink at a tie)",
    "FractionalMaxPool": "fractional_max_pool (kink at a tie)",
    "TopKV2": "top_k / sort (kink at a tie)",
    "TopK": "top_k (kink at a tie)",
    "Select": "tf.where (a branch)",
    "SelectV2": "tf.where (a branch)",
    "ClipByValue": "clip_by_value (kinks at the bounds)",
    "If": "tf.cond (a branch)",
    "StatelessIf": "tf.cond (a branch)",
    "Case": "tf.switch_case (a branch)",
    "StatelessCase": "tf.switch_case (a branch)",
    "Switch": "a v1 cond (a branch)",
    "Merge": "a v1 cond (a branch)",
    "FloorMod": "floormod (jumps)",
    "Mod": "mod (jumps)",
    "TruncateMod": "truncatemod (jumps)",
    "FloorDiv": "floordiv (jumps)",
    "TruncateDiv": "truncatediv (jumps)",
    **{op: f"{op} (piecewise constant)" for op in sorted(QUANTIZING_OPS)},
}
#: Ops running Python code that the graph cannot see into.
OPAQUE_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
#: Attributes of call and control-flow ops that name a function of the graph's library.
FUNCTION_ATTRS = ("f", "body", "cond", "then_branch", "else_branch", "branches")


@dataclass
class Construction:
    """A straight-through estimator on the path: where it is, and the tensors
    whose values it makes (held constant for ``gradient_beside``)."""

    site: GraphSite
    results: list = field(default_factory=list)


def straight_through(graph, name: str, output: str) -> list[Construction] | None:
    """The straight-through estimators on the path from input ``name`` to
    ``output`` (module docstring); ``None`` when the graph cannot be traced."""
    if graph is None or not graph.trace():
        return None
    path = graph.path_ops(name, output)
    start = graph.inputs[name].op
    reached = graph.forward_ops(name) | {start}
    uncut = graph.forward_ops(name, stop_at_cuts=True) | {start}
    found = []
    for op in path:
        if op.type in SURROGATE_OPS:
            found.append(Construction(
                graph.site(op, f"{op.type} at {graph.location(op) or op.name} "
                               "(a straight-through gradient by design)"),
                [t for t in op.outputs if t.dtype.is_floating],
            ))
        elif op.type in QUANTIZING_OPS and _overridden(op):
            found.append(Construction(
                graph.site(op, f"{op.type} at {graph.location(op) or op.name} with its gradient "
                               f"overridden by '{_overridden(op)}'"),
                list(op.outputs),
            ))
        elif op.type in ("StopGradient", "PreventGradient"):
            construction = _stop_gradient_pattern(graph, op, reached, uncut)
            if construction is not None:
                found.append(construction)
        elif custom_result_count(op) is not None:
            inside = graph.inside_custom_gradients([op])
            quantizers = [o for o in graph.graph.get_operations() if o in inside and o.type in QUANTIZING_OPS]
            if quantizers:
                q = quantizers[0]
                n = custom_result_count(op)
                found.append(Construction(
                    graph.site(op, f"{describe(op)} at {graph.location(op) or op.name} around "
                                   f"{q.type} at {graph.location(q) or q.name}"),
                    list(op.outputs[:n]),
                ))
    return found


def _overridden(op) -> str:
    """The gradient function name set by ``gradient_override_map``, or ""."""
    try:
        value = op.get_attr("_gradient_op_type")
    except (ValueError, AttributeError):
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _stop_gradient_pattern(graph, stop, reached, uncut) -> Construction | None:
    """``x + tf.stop_gradient(q(x) - x)`` around ``stop`` (module docstring):
    the stop_gradient's input is a difference (``Sub``, or an ``Add`` of a
    negation) of a quantized value and a term ``t`` with no quantizer in it, and
    its output is added back to that same ``t`` (``t + sg(q - t)``, or
    ``t - sg(t - q)``), which carries the input without a cut. The sum is q(x)
    forward and the identity backward."""
    upstream = ancestors([stop])
    quantizers = [
        o for o in graph.graph.get_operations()
        if o in upstream and o in reached and o.type in QUANTIZING_OPS
    ]
    if not quantizers:
        return None
    difference = _source(stop.inputs[0]).op
    if difference.type not in ADDING_OPS:
        return None
    terms = set()
    for t in difference.inputs:
        t = _source(t)
        if t.op.type == "Neg":
            t = _source(t.op.inputs[0])
        if not any(o.type in QUANTIZING_OPS for o in ancestors([t.op])):
            terms.add(t.ref())
    if not terms:
        return None
    # Follow the stop_gradient's value through pass-through ops to an adding op
    # whose other operand is that term, carrying the input without a cut.
    frontier, seen = [stop.outputs[0]], set()
    while frontier:
        t = frontier.pop()
        for consumer in t.consumers():
            if consumer in seen:
                continue
            seen.add(consumer)
            if consumer.type in PASS_THROUGH_OPS:
                frontier.extend(o for o in consumer.outputs if o.dtype.is_floating)
            elif consumer.type in ADDING_OPS:
                others = [_source(s) for s in consumer.inputs if s is not t]
                if any(s.ref() in terms and s.op in uncut for s in others):
                    q = quantizers[0]
                    return Construction(
                        graph.site(stop, f"x + tf.stop_gradient(q(x) - x) at "
                                         f"{graph.location(consumer) or consumer.name} around "
                                         f"{q.type} at {graph.location(q) or q.name}"),
                        [consumer.outputs[0]],
                    )
    return None


def _source(t):
    """``t`` before ops that only move or re-type it."""
    while t.op.type in PASS_THROUGH_OPS and t.op.type != "IdentityN" and t.op.inputs:
        t = t.op.inputs[0]
    return t


def has_nonsmooth_op(graph) -> bool:
    """Whether any op of a traced graph (a ``tf.Graph``, or a ``ModelGraph``
    that can be traced) is in ``NONSMOOTH_OPS``: the step rule of dense
    directions (``finite_diff.dense_step_size``). Not an excuse: a kink still
    needs ``nonsmooth`` on the path and the slopes' gap."""
    if graph is not None and hasattr(graph, "trace"):
        graph = graph.graph if graph.trace() else None
    if graph is None:
        return False
    seen: set = set()
    return any(
        op.type in NONSMOOTH_OPS or _function_body_reason(graph, op.node_def, seen, opaque=False)
        for op in graph.get_operations()
    )


def nonsmooth(graph, name: str, output: str) -> list[GraphSite] | None:
    """Ops on the path from ``name`` to ``output`` that can make a kink (module
    docstring), at most 5; ``None`` when the graph cannot be traced."""
    if graph is None or not graph.trace():
        return None
    start = graph.inputs[name].op
    reached = graph.forward_ops(name) | {start}
    sites = []
    for op in graph.path_ops(name, output):
        why = _nonsmooth_reason(graph.graph, op, reached)
        if why:
            sites.append(graph.site(op, f"{why} at {graph.location(op) or op.name}"))
            if len(sites) == 5:
                break
    return sites


def _nonsmooth_reason(g, op, reached) -> str:
    if op.type in NONSMOOTH_OPS:
        return NONSMOOTH_OPS[op.type]
    if op.type in OPAQUE_OPS:
        return f"{op.type} (Python code the graph cannot see into)"
    carrying_in = any(carries(t) and t.op in reached for t in op.inputs)
    if carrying_in and op.outputs and not any(carries(t) for t in op.outputs):
        return f"{op.type} (integer or bool output: the function branches on it)"
    inner = _function_body_reason(g, op.node_def, set())
    return f"{op.type} calling {inner}" if inner else ""


def _function_body_reason(g, node_def, seen, opaque: bool = True) -> str:
    """The first non-smooth or opaque op inside the functions ``node_def`` calls
    (``opaque=False``: non-smooth ops only; a function the graph cannot see
    into then shows nothing)."""
    for key in FUNCTION_ATTRS:
        if key not in node_def.attr:
            continue
        attr = node_def.attr[key]
        names = [attr.func.name] if attr.HasField("func") else [f.name for f in attr.list.func]
        for fname in names:
            if not fname or fname in seen:
                continue
            seen.add(fname)
            try:
                definition = g._get_function(fname).cached_definition
            except Exception:  # not in the library: nothing can be seen inside
                if not opaque:
                    continue
                return f"{fname} (a function the graph cannot see into)"
            for node in definition.node_def:
                if node.op in NONSMOOTH_OPS or (opaque and node.op in OPAQUE_OPS):
                    return f"{node.op} in {fname}"
                inner = _function_body_reason(g, node, seen, opaque)
                if inner:
                    return inner
    return ""


def gradient_beside(graph, name: str, output: str, constructions, rows) -> np.ndarray | None:
    """Rows ``rows`` (flat output indices) of the Jacobian of ``output`` with
    respect to ``name`` with the results of ``constructions`` held constant:
    ``[len(rows), input size]``, or ``None`` when it cannot be computed."""
    import tensorflow as tf

    try:
        x, y = graph.inputs[name], graph.outputs[output]
        stops = [t for c in constructions for t in c.results]
        with graph.graph.as_default():
            seed = tf.compat.v1.placeholder(y.dtype, y.shape)
            (grad,) = graph_gradients(y, [x], grad_ys=seed, stop_gradients=stops)
        size = int(np.prod(x.shape))
        if grad is None:
            return np.zeros((len(rows), size))
        feeds = [graph.inputs[n] for n in graph.model.point]
        fn = graph.prune(feeds + [seed], [grad])
        from gradcli.numerics.held import tensors_of
        values = list(tensors_of(graph.model.point).values())
        out = np.zeros((len(rows), size))
        shape = tuple(y.shape)
        for i, r in enumerate(rows):
            v = np.zeros(int(np.prod(shape)), dtype=y.dtype.as_numpy_dtype)
            v[r] = 1
            (g,) = fn(*values, tf.constant(v.reshape(shape)))
            out[i] = np.asarray(g, dtype=float).reshape(-1)
        return out
    except Exception:  # cannot be computed: the construction is not shown to explain
        return None
