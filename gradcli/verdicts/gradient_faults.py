"""Gradients that fail before any value is compared: the op to blame.

Each function takes a ``graph.TracedGraph`` and names one op (a ``GraphSite``,
described by ``describe_op``), or None when none can be told:

* ``raising_gradient``: the op whose gradient function raised an exception
  while the model was differentiated, from the exception's frames
  (``_gradient_frame``) or, when TensorFlow filtered them out, by building and
  running each op's own gradient in backpropagation's order.
* ``nondeterministic_gradient``: the first op whose own gradient, run twice at
  the same values with the same cotangent, gives two different results.
* ``forward_rule_missing``: the first op whose forward mode TensorFlow cannot
  take (its gradient has no gradient with respect to the cotangent).

Only the ops a gradient flows through count (``_differentiated_path_ops``:
the forward code inside a ``tf.custom_gradient`` is left out, its gradient is
the decorated function's).
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics.autodiff import graph_gradients
from gradcli.results import GraphSite
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts.graph_ops import TRIVIAL_OPS, custom_gradient_function, override

tf = import_tensorflow()

#: Frames of TensorFlow's gradient machinery and the local that names the op
#: whose gradient they call: graph mode's forward op, eager mode's op type, a
#: ``tf.custom_gradient``'s user gradient (eager and graph wrappers).
_GRADIENT_FRAMES = {
    "_GradientsHelper": ("op", "op"),
    "_gradient_function": ("type", "op_name"),
    "actual_grad_fn": ("custom", "grad_fn"),
    "tape_grad_fn": ("custom", "grad_fn"),
}


def _gradient_frame(exc: BaseException):
    """``("op", Operation)``, ``("type", "Qr")`` or ``("custom", code)`` from the
    innermost gradient-machinery frame of ``exc``'s traceback, else None.

    One exception: a ``tf.custom_gradient`` still recording its call (its
    eager decorator's frame, after its forward code returned) was being
    differentiated in forward mode, which TensorFlow does by running (and
    differentiating) its gradient function: that custom gradient is the op,
    whatever gradient raised inside its gradient function."""
    found, tb = None, exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_eager_mode_decorator" and "tensorflow" in frame.f_code.co_filename:
            code = getattr(frame.f_locals.get("grad_fn"), "__code__", None)
            if code is not None:
                return ("custom", code)
        kind = _GRADIENT_FRAMES.get(frame.f_code.co_name)
        if kind is not None and "tensorflow" in frame.f_code.co_filename:
            value = frame.f_locals.get(kind[1])
            if kind[0] == "custom":
                value = getattr(value, "__code__", None)
            elif kind[0] == "type" and isinstance(value, bytes):
                value = value.decode()
            if kind[0] == "type" and value in ("PartitionedCall", "StatefulPartitionedCall"):
                value = None  # a tf.function's call: the op inside is found by search
            if value is not None and not (kind[0] == "op" and not hasattr(value, "traceback")):
                found = (kind[0], value)
        tb = tb.tb_next
    return found


def _matches_hint(op, hint) -> bool:
    kind, value = hint
    if kind == "type":
        return op.type == value or override(op) is not None and override(op)[0] == value
    user_grad = custom_gradient_function(op)
    return getattr(user_grad, "__code__", None) is value


def _differentiated_path_ops(graph) -> list:
    """The checkable ops on any differentiated path, in graph order (the
    forward code inside a custom gradient left out: its gradient is the
    rule's)."""
    path = set()
    for name in graph.model.wrt:
        for output in graph.outputs:
            if name in graph.inputs:
                path |= set(graph.path_ops(name, output))
    ordered = [op for op in graph.graph.get_operations() if op in path]
    inside = graph.inside_custom_gradients(ordered)
    return [op for op in ordered if op not in inside and graph.checkable(op)]


def raising_gradient(graph, exc: BaseException) -> GraphSite | None:
    """The op whose gradient function raised ``exc`` while the model was
    differentiated, located in the model file; None if it cannot be told.

    First from the frames of ``exc`` (``_gradient_frame``): a graph gradient
    names its forward op; an eager one names the op type or the
    ``tf.custom_gradient`` whose gradient ran, matched here to the op of
    the traced graph. TensorFlow filters its own frames out of many
    tracebacks, so otherwise each differentiable op on a differentiated
    path is given its own gradient, in backpropagation's order (last op
    first), built and run at the values it saw with a cotangent of ones:
    the first that raises is the one. Never the op that happened to raise
    inside a gradient function (an AddV2 of its arithmetic)."""
    hint = _gradient_frame(exc)
    if hint is not None and hint[0] == "op":
        return graph.site(hint[1], graph.describe_op(hint[1]))
    if not graph.trace():
        if hint is not None and hint[0] == "type":
            return GraphSite(op_type=hint[1], op_name="", location="", description=hint[1])
        return None
    ops = _differentiated_path_ops(graph)[::-1]
    if hint is not None:
        matches = [op for op in ops if _matches_hint(op, hint)]
        if matches:
            return graph.site(matches[0], graph.describe_op(matches[0]))
        if hint[0] == "type":
            return GraphSite(op_type=hint[1], op_name="", location="", description=hint[1])
    try:
        feeds, feed_values, seen = graph.seen_values(ops)
    except Exception:  # the model cannot be run in graph form: no search
        return None
    for op in ops:
        if _gradient_raises(graph, op, feeds, feed_values, seen):
            return graph.site(op, graph.describe_op(op))
    return None


def _gradient_raises(graph, op, feeds, feed_values, seen) -> bool:
    """Whether ``op``'s own gradient raises when built, or when run at the
    values the op saw with a cotangent of ones."""
    xs, ys = graph.local_inputs(op), graph.local_outputs(op)
    try:
        with graph.graph.as_default():
            seeds = [tf.compat.v1.placeholder(y.dtype, y.shape) for y in ys]
            grads = graph_gradients(ys, xs, grad_ys=seeds, stop_gradients=xs)
    except LookupError:  # no gradient registered: a disconnected input, not a raise
        return False
    except Exception:  # noqa: BLE001 - whatever the gradient function raised
        return True
    pairs = [(x, g) for x, g in zip(xs, grads) if g is not None]
    if not pairs:
        return False
    fed_refs = {t.ref() for t in feeds}
    extra = [x for x, _ in pairs if x.ref() not in fed_refs]
    try:
        backward = graph.prune(feeds + extra + seeds, [getattr(g, "values", g) for _, g in pairs])
    except Exception:  # cannot be cut out of the graph: no verdict
        return False
    values = dict(zip([t.ref() for t in feeds], feed_values))
    values.update({x.ref(): tf.constant(np.asarray(seen[x.ref()])) for x in extra if x.ref() in seen})
    if any(x.ref() not in values for x in extra):
        return False
    ones = [tf.ones(np.shape(seen[y.ref()]) if y.ref() in seen else [], y.dtype) for y in ys]
    try:
        backward(*[values[t.ref()] for t in feeds + extra], *ones)
    except Exception:  # noqa: BLE001
        return True
    return False


def nondeterministic_gradient(graph) -> GraphSite | None:
    """The first op on a differentiated path whose own gradient, run twice
    at the values the op saw with the same cotangent (ones), gives two
    different results: a random op or state inside a gradient function."""
    if not graph.trace():
        return None
    ops = _differentiated_path_ops(graph)
    try:
        feeds, feed_values, seen = graph.seen_values(ops)
    except Exception:  # the model cannot be run in graph form: no search
        return None
    for op in ops:
        xs, ys = graph.local_inputs(op), graph.local_outputs(op)
        try:
            with graph.graph.as_default():
                grads = [g for g in graph_gradients(ys, xs, grad_ys=[tf.ones_like(y) for y in ys],
                                                    stop_gradients=xs) if g is not None]
            if not grads:
                continue
            fed_refs = {t.ref() for t in feeds}
            extra = [x for x in xs if x.ref() not in fed_refs]
            run = graph.prune(feeds + extra, grads)
            values = list(feed_values) + [tf.constant(seen[x.ref()]) for x in extra]
            first, second = run(*values), run(*values)
        except Exception:  # noqa: BLE001 - an op that cannot be run alone says nothing
            continue
        if any(not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
               for a, b in zip(first, second)):
            return graph.site(op, graph.describe_op(op))
    return None


def forward_rule_missing(graph, name, output) -> GraphSite | None:
    """The first op on the path whose forward mode TensorFlow cannot take:
    forward mode transposes an op's gradient, so it needs the gradient of
    that gradient with respect to the cotangent, and an op whose gradient
    has none (``ResizeBilinear``'s ``ResizeBilinearGrad``) stops it."""
    if not graph.trace():
        return None
    for op in graph.path_ops(name, output):
        xs, ys = graph.local_inputs(op), graph.local_outputs(op)
        if not xs or not ys or op.type in TRIVIAL_OPS:
            continue
        try:
            with graph.graph.as_default():
                seeds = [tf.compat.v1.placeholder(y.dtype, y.shape) for y in ys]
                grads = [g for g in graph_gradients(ys, xs, grad_ys=seeds, stop_gradients=xs)
                         if g is not None]
                if grads and all(g is None for g in graph_gradients(grads, seeds)):
                    return graph.site(op, graph.describe_op(op))  # declared not differentiable
        except LookupError:  # no gradient registered for the gradient's ops
            return graph.site(op, graph.describe_op(op))
        except Exception:  # noqa: BLE001 - an op that cannot be differentiated here says nothing
            continue
    return None
