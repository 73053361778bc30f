"""The precision rule: the lowest floating precision the differentiated values
pass through, and the ops that lower it.

A check's steps and tolerances follow the coarsest dtype on the path, since a
float32 op in a float64 model rounds every value that crosses it (and a
gradient function that computes in float32 rounds the analytic side as much).
Complex tensors carry values too and round as their parts do (complex64 as
float32: keras-hub's FNet mixes tokens with an FFT of a float32 cast), and the
ops inside a loop's body, a branch or a called function count as the ops
around them do (``inside_bodies``).
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
from gradcli.verdicts.graph_ops import carries, cut_description, floating, precision_dtype

tf = import_tensorflow()


def precision(graph) -> tuple[str | None, list[GraphSite]]:
    """The lowest floating precision among the tensors that carry the
    differentiated values, and the ops that lower it.

    Carrying tensors (``value_path``): in the forward pass, the floating and
    complex tensors on a path from a differentiated input to an output; in
    the reverse pass (``_gradient_tensors``), those on a path from a
    cotangent or a forward carrying tensor to a gradient; and inside the
    functions an op on either path runs on its values (``inside_bodies``: a
    loop's body, a branch, a called ``tf.function``), however deep. A complex
    tensor rounds as its parts do (``precision_dtype``: complex64 is float32),
    so an FFT of a float32 cast counts as float32. Constants, shapes,
    counters, random draws and other plumbing beside them never count, even
    when they are float32 and are added in (``tf.recompute_grad`` adds a
    float32 0-or-NaN built from a bool of the cotangent). The sites are the
    carrying ops with a carrying output in that precision and no carrying
    input in it (a ``Cast``, a Keras autocast, a gradient function that
    casts; inside a body, named by the op that runs the body), or a
    differentiated input of that dtype. ``(None, [])`` when the graph cannot
    be traced or no value reaches an output."""
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
    enclosing = inside_bodies(graph.graph, carrying)
    lowest = "float64"
    for t in carrying.values():
        lowest = coarser(lowest, precision_dtype(t.dtype))
    for x in xs:
        lowest = coarser(lowest, x.dtype.name)
    sites = [graph.site(x.op, f"input {x.op.name} -> {lowest}") for x in xs if x.dtype.name == lowest]
    lowered = {t.op for t in carrying.values() if precision_dtype(t.dtype) == lowest}
    reverse = {t.op for t in backward.values()} - {t.op for t in forward.values()}
    ops = list(graph.graph.get_operations())
    position = {op: i for i, op in enumerate(ops)}
    ordered = ops + sorted(enclosing, key=lambda op: position.get(enclosing[op], len(ops)))
    seen = set()
    for op in ordered:
        if op in seen or op not in lowered or op.type == "Placeholder" or any(
            t.ref() in carrying and precision_dtype(t.dtype) == lowest for t in op.inputs
        ):
            continue
        seen.add(op)
        if op in enclosing:
            sites.append(_body_site(graph, op, enclosing[op], lowest, enclosing[op] in reverse))
        elif op in reverse:
            sites.append(_gradient_site(graph, op, lowest))
        else:
            sites.append(graph.site(op, f"{op.type} -> {lowest}"))
    return lowest, sites


def path_precision(starts, ends, g=None) -> str:
    """The lowest floating precision among the tensors on a path from
    ``starts`` to ``ends`` (``value_path``), inside the functions the ops
    between run included (``inside_bodies``, with ``g`` the graph holding
    their library): the precision a function from ``starts`` to ``ends``
    rounds to, which its finite differences are taken at (a local check of
    a custom gradient whose code casts to float32 or complex64)."""
    from gradcli.numerics.finite_diff import coarser

    carrying = value_path(starts, ends)
    if g is not None:
        inside_bodies(g, carrying)
    lowest = "float64"
    for t in carrying.values():
        lowest = coarser(lowest, precision_dtype(t.dtype))
    return lowest


#: Attributes naming the functions an op runs on the values it carries: a
#: loop's body, a branch of a conditional, a called function. A loop's
#: condition only decides how often the body runs: its values go nowhere.
VALUE_BODIES = ("body", "then_branch", "else_branch", "branches", "f")


def inside_bodies(g, carrying: dict) -> dict:
    """Adds to ``carrying`` the carrying tensors inside the functions each of
    its ops runs (``VALUE_BODIES``), recursively: in each body, those on a
    path from the body's inputs that stand for the op's carrying inputs to
    its outputs that stand for the op's carrying outputs (by position; all
    of them when the counts do not match). Returns ``inner op -> the op of
    ``g`` that runs it``, the op a report names it by (a body built from the
    graph's function library has no line of its own)."""
    enclosing: dict = {}
    stack = [(t.op, None) for t in list(carrying.values())]
    done = set()
    while stack:
        op, outer = stack.pop()
        if op in done:
            continue
        done.add(op)
        for body in _value_bodies(g, op):
            starts = _standing_for(body.inputs, op.inputs, carrying)
            ends = _standing_for(body.outputs, op.outputs, carrying)
            inner = value_path(starts, ends)
            for ref, t in inner.items():
                if ref not in carrying:
                    carrying[ref] = t
                enclosing.setdefault(t.op, outer or op)
                stack.append((t.op, outer or op))
    return enclosing


def _value_bodies(g, op) -> list:
    """The function graphs ``op`` runs on its values (``VALUE_BODIES``), from
    the library of ``g`` (or of the body graph that holds ``op``)."""
    found = []
    for key in VALUE_BODIES:
        try:
            attr = op.get_attr(key)
        except (ValueError, TypeError):
            continue
        for function in attr if isinstance(attr, list) else [attr]:
            name = getattr(function, "name", "")
            for library in (op.graph, g):
                try:
                    found.append(library._get_function(name).graph)
                    break
                except Exception:  # noqa: BLE001 - not in this library: the next
                    continue
    return found


def _standing_for(inner: list, outer: list, carrying: dict) -> list:
    """The tensors of a body (``inner``: its inputs or outputs) that stand for
    carrying tensors of the op that runs it (``outer``), matched from the
    end (a conditional's first input is its predicate); all the carrying
    ones when the counts do not leave a match."""
    offset = len(outer) - len(inner)
    if offset < 0:
        return [t for t in inner if carries(t)]
    return [t for t, o in zip(inner, outer[offset:]) if carries(t) and o.ref() in carrying]


def _body_site(graph, op, outer, dtype: str, reverse: bool) -> GraphSite:
    """An op inside a function body, named by the op of the model's graph that
    runs the body (located as ``_gradient_site`` locates it when it is of
    the reverse pass): a body built from the graph's library has no line."""
    where = _gradient_site(graph, outer, dtype) if reverse else graph.site(outer, f"{outer.type} -> {dtype}")
    return GraphSite(
        op_type=op.type, op_name=op.name, location=where.location,
        description=f"{op.type} inside {where.description}",
    )


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
    """The floating and complex tensors (``carries``) on a path from a tensor
    of ``starts`` to one of ``ends`` (``ref -> tensor``): reached from
    ``starts`` along such tensors and read, along them, by an op that leads
    to ``ends``. A cut (``cut_description``) is on a path but nothing flows on
    through it. With ``within``, only those ops count (the reverse pass's
    own)."""
    starts = [t for t in starts if carries(t)]
    reached, stack = {}, list(starts)
    while stack:
        t = stack.pop()
        for consumer in t.consumers():
            if within is not None and consumer not in within:
                continue
            for out in consumer.outputs:
                if carries(out) and out.ref() not in reached:
                    reached[out.ref()] = out
                    if not cut_description(consumer):
                        stack.append(out)
    for t in starts:  # a start is on a path when it leads to an end
        reached.setdefault(t.ref(), t)
    needed, stack = {}, [t for t in ends if carries(t)]
    while stack:
        t = stack.pop()
        if t.ref() in needed:
            continue
        needed[t.ref()] = t
        op = t.op
        if (within is not None and op not in within) or cut_description(op):
            continue
        stack.extend(i for i in op.inputs if carries(i))
    return {r: t for r, t in needed.items() if r in reached}
