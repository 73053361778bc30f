"""The precision rule: the lowest floating precision the differentiated values
pass through, and the ops that lower it.

A check's steps and tolerances follow the coarsest dtype on the path, since a
float32 op in a float64 model rounds every value that crosses it (and a
gradient function that computes in float32 rounds the analytic side as much).
Only the tensors that carry the differentiated values count (``value_path``):
constants, shapes, counters, random draws and other plumbing beside them are
no part of the function being differenced, even when they are float32. See
``precision`` for the rule itself; ``(None, [])`` when the graph cannot be
traced or no value reaches an output.
"""

from __future__ import annotations

import os
import re

from gradcli.numerics.autodiff import graph_gradients
from gradcli.results import GraphSite
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts.graph_ops import cut_description, floating

tf = import_tensorflow()


def precision(graph) -> tuple[str | None, list[GraphSite]]:
    """The lowest floating precision among the tensors that carry the
    differentiated values, and the ops that lower it.

    Carrying tensors (``value_path``): in the forward pass, the floating
    tensors on a path from a differentiated input to an output; in the
    reverse pass (``_gradient_tensors``), the floating tensors on a path from a
    cotangent or a forward carrying tensor to a gradient. Constants, shapes,
    counters, random draws and other plumbing beside them never count, even
    when they are float32 and are added in (``tf.recompute_grad`` adds a
    float32 0-or-NaN built from a bool of the cotangent). The sites are the
    carrying ops with a carrying output in that dtype and no carrying input
    in it (a ``Cast``, a Keras autocast, a gradient function that casts),
    or a differentiated input of that dtype. ``(None, [])`` when the graph
    cannot be traced or no value reaches an output."""
    from gradcli.numerics.finite_diff import coarser

    if not graph.trace():
        return None, []
    xs = [graph.inputs[n] for n in graph.model.wrt if n in graph.inputs]
    ys = [t for t in graph.outputs.values() if floating(t)]
    forward = value_path(xs, ys)
    if not forward:
        return None, []
    backward = _gradient_tensors(graph, forward)
    carrying = {**forward, **backward}
    lowest = "float64"
    for t in carrying.values():
        lowest = coarser(lowest, t.dtype.name)
    for x in xs:
        lowest = coarser(lowest, x.dtype.name)
    sites = [graph.site(x.op, f"input {x.op.name} -> {lowest}") for x in xs if x.dtype.name == lowest]
    lowered = {t.op for t in carrying.values() if t.dtype.name == lowest}
    reverse = {t.op for t in backward.values()} - {t.op for t in forward.values()}
    for op in graph.graph.get_operations():
        if op not in lowered or op.type == "Placeholder" or any(
            t.ref() in carrying and t.dtype.name == lowest for t in op.inputs
        ):
            continue
        if op in reverse:
            sites.append(_gradient_site(graph, op, lowest))
        else:
            sites.append(graph.site(op, f"{op.type} -> {lowest}"))
    return lowest, sites


def _gradient_site(graph, op, dtype: str) -> GraphSite:
    """A reverse-pass op: located by its own model-file line (a custom
    gradient's code), else by the forward op whose gradient made it."""
    model_path = os.path.abspath(graph.model.path)
    if any(os.path.abspath(f.filename) == model_path for f in op.traceback):
        return graph.site(op, f"{op.type} in the gradient -> {dtype}")
    match = re.match(r"(?:gradients(?:_\d+)?/)+(.+?)_grad/", op.name)
    try:
        target = graph.graph.get_operation_by_name(match.group(1)) if match else None
    except (KeyError, ValueError):
        target = None
    if target is None:
        return graph.site(op, f"{op.type} in the gradient -> {dtype}")
    return GraphSite(
        op_type=op.type, op_name=op.name, location=graph.location(target),
        description=f"{op.type} in the gradient of {target.type} -> {dtype}",
    )


def _gradient_tensors(graph, forward: dict) -> dict:
    """The carrying tensors of the reverse pass (``tf.gradients`` of the
    outputs with respect to the differentiated inputs, seeded with a
    cotangent placeholder per output): those on a floating path from a
    cotangent, a differentiated input or a forward carrying tensor
    (``forward``) to a gradient. A gradient function that computes in
    float32 rounds the analytic side as much as a float32 forward rounds the
    numeric one; its constants and the reverse pass's plumbing do not."""
    g = graph.graph
    before = set(g.get_operations())
    ys = [t for t in graph.outputs.values() if floating(t)]
    xs = [graph.inputs[n] for n in graph.model.wrt if n in graph.inputs]
    try:
        with g.as_default(), g.name_scope("gradients"):
            seeds = [tf.compat.v1.placeholder(y.dtype, y.shape, name="cotangent") for y in ys]
            grads = graph_gradients(ys, xs, grad_ys=seeds)
    except Exception:  # no gradient registered somewhere: forward dtypes only
        return {}
    ends = [t for t in grads if t is not None]
    created = {op for op in g.get_operations() if op not in before}
    starts = seeds + xs + [t for t in forward.values()]
    return value_path(starts, ends, within=created)


def value_path(starts, ends, within=None) -> dict:
    """The floating tensors on a path from a tensor of ``starts`` to one of
    ``ends`` (``ref -> tensor``): reached from ``starts`` along floating tensors
    and read, along floating tensors, by an op that leads to ``ends``. A cut
    (``cut_description``) is on a path but nothing flows on through it. With
    ``within``, only those ops count (the reverse pass's own)."""
    starts = [t for t in starts if floating(t)]
    reached, stack = {}, list(starts)
    while stack:
        t = stack.pop()
        for consumer in t.consumers():
            if within is not None and consumer not in within:
                continue
            for out in consumer.outputs:
                if floating(out) and out.ref() not in reached:
                    reached[out.ref()] = out
                    if not cut_description(consumer):
                        stack.append(out)
    for t in starts:  # a start is on a path when it leads to an end
        reached.setdefault(t.ref(), t)
    needed, stack = {}, [t for t in ends if floating(t)]
    while stack:
        t = stack.pop()
        if t.ref() in needed:
            continue
        needed[t.ref()] = t
        op = t.op
        if (within is not None and op not in within) or cut_description(op):
            continue
        stack.extend(i for i in op.inputs if floating(i))
    return {r: t for r, t in needed.items() if r in reached}
