"""Where a path through the traced graph loses or bends its gradient.

Each function takes a ``graph.TracedGraph`` and an input ``name`` (and an
``output``), and returns the ops that explain a verdict without checking any
gradient numerically:

* ``cut_sites``: ops on a path from an input to an output through which no
  gradient flows: ``tf.stop_gradient``, ``tf.round``/``floor``/``ceil``, a cast to
  an integer or bool, ops with no registered gradient; and ``tf.sign``, whose
  gradient is registered as zero (``graph_ops.cut_description``). At most 5.
  An op made inside a library or a helper module says where
  (``library_cuts.op_origin``: "made at LIB:LINE, called from ...").
* ``surrogate_sites``: straight-through ops (``FakeQuant*``) that an input reaches
  through more than one of their inputs (x itself and min/max taken from x).
* ``none_gradient_sites``: for a disconnected input, the ops on the path whose
  registered gradient returns None for the input the path enters by. At most 5.
* ``boundaries``: the constants at which an op the input reaches switches
  branch (``FIXED_BOUNDARIES``, a clip's or min/max's constant side), where a
  sweep should look. At most 8.

An untraceable graph gives no sites (``[]``).
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics.autodiff import graph_gradients
from gradcli.results import GraphSite
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts.library_cuts import op_origin
from gradcli.verdicts.graph_ops import SURROGATE_OPS, TRIVIAL_OPS, cut_description, floating

tf = import_tensorflow()

#: Branch points of ops whose boundary is fixed (see ``boundaries``).
FIXED_BOUNDARIES = {"Relu": (0.0,), "Relu6": (0.0, 6.0), "LeakyRelu": (0.0,), "Elu": (0.0,),
                    "Selu": (0.0,), "Abs": (0.0,)}


def cut_sites(graph, name, output) -> list[GraphSite]:
    """Ops on the path from ``name`` to ``output`` through which no gradient flows."""
    if not graph.trace():
        return []
    sites = []
    for op in graph.path_ops(name, output):
        description = cut_description(op)
        if description:
            sites.append(graph.site(op, description + op_origin(graph, op)))
    return sites[:5]


def surrogate_sites(graph, name, output) -> list[GraphSite]:
    """Straight-through ops that ``name`` reaches through more than one of their inputs."""
    if not graph.trace():
        return []
    reached = graph.forward_ops(name) | {graph.inputs[name].op}
    sites = []
    for op in graph.path_ops(name, output):
        if op.type not in SURROGATE_OPS:
            continue
        arg_names = [a.name for a in op.op_def.input_arg]
        via = [arg_names[i] if i < len(arg_names) else str(i)
               for i, t in enumerate(op.inputs) if t.op in reached]
        if len(via) > 1:
            sites.append(graph.site(
                op, f"{op.type} at {graph.location(op) or op.name} by {len(via)} paths "
                f"({', '.join(via)})",
            ))
    return sites


def none_gradient_sites(graph, name, output) -> list[GraphSite]:
    """Ops on the path from ``name`` to ``output`` whose registered gradient
    returns None (or that have none registered) for an input the path enters
    by: where a disconnected gradient is lost."""
    if not graph.trace():
        return []
    path = graph.path_ops(name, output)
    on_path = set(path) | {graph.inputs[name].op}
    sites = []
    for op in path:
        if op.type in TRIVIAL_OPS:
            continue
        entered = [i for i, t in enumerate(op.inputs) if t.op in on_path and floating(t)]
        ys = [t for t in op.outputs if floating(t)]
        if not entered or not ys:
            continue
        xs = [op.inputs[i] for i in entered]
        try:
            with graph.graph.as_default():
                grads = graph_gradients(ys, xs, stop_gradients=xs)
        except LookupError:
            sites.append(graph.site(op, f"{op.type} has no registered gradient"))
            continue
        except Exception:
            continue
        arg_names = [a.name for a in op.op_def.input_arg] if op.op_def else []
        lost = [
            arg_names[i] if i < len(arg_names) and len(arg_names) == len(op.inputs) else f"input {i}"
            for i, g in zip(entered, grads) if g is None
        ]
        if lost:
            sites.append(graph.site(op, f"{op.type} returns no gradient for {', '.join(lost)}"))
    return sites[:5]


def boundaries(graph, name) -> list[tuple[float, str]]:
    """Constants at which an op that ``name`` reaches switches branch: the
    clip_value_min/max of ClipByValue, relu6's 0 and 6, relu's (and
    leaky relu's) 0, and the constant side of a Minimum/Maximum. Each comes
    with ``"Op at file:line"``; at most 8."""
    if not graph.trace():
        return []
    found = {}
    for op in graph.graph.get_operations():
        if op not in graph.forward_ops(name):
            continue
        values = list(FIXED_BOUNDARIES.get(op.type, ()))
        if op.type in ("ClipByValue", "Minimum", "Maximum"):
            for t in op.inputs:
                if t.op.type == "Const" and t.dtype.is_floating:
                    array = tf.make_ndarray(t.op.get_attr("value"))
                    values += [float(v) for v in np.unique(array)[:2]]
        for value in values:
            found.setdefault(value, f"{op.type} at {graph.location(op) or op.name}")
    return list(found.items())[:8]
