"""The model's traced graph: where a path is cut, which op's own gradient is wrong.

``ModelGraph`` traces ``Model.function`` once into a graph
(``tf.compat.v1.wrap_function``, which keeps the graph prunable: any
intermediate tensor can be fed and any fetched). Every op records the Python
stack that created it, so each finding names the model-file line.

* ``cut_sites``: ops on a path from an input to an output through which no
  gradient flows: ``tf.stop_gradient``, ``tf.round``/``floor``/``ceil``, a cast to
  an integer or bool, ops with no registered gradient; and ``tf.sign``, whose
  gradient is registered as zero.
* ``surrogate_sites``: straight-through ops (``FakeQuant*``) that an input reaches
  through more than one of their inputs (x itself and min/max taken from x).
* ``culprit``: check each differentiable op on the path, in graph order, on its
  own: the function from its floating inputs to its floating outputs is
  evaluated by feeding the values it saw at the point, its registered (or
  custom) gradient gives <u, J^T v> for random u, v (seeded), and central
  differences with Richardson (``FiniteDifferences.along``) give <v, J u>. The
  verdict rule is ``compare.compare_projections`` with the check's tolerance;
  the first op with a ``mismatch`` is the culprit. A ``tf.custom_gradient`` op is
  checked as the whole decorated function (its arguments to its results) and
  the report names the line of the decorated function's ``def``.
"""

from __future__ import annotations

import ast
import os
import sys
from functools import lru_cache

import numpy as np

from gradcli.verdicts import compare
from gradcli.model.paths import relative_path
from gradcli.results import Culprit, GraphSite
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: Ops whose gradient is None (or zero) although their output is floating.
CUT_OPS = {
    "StopGradient": "tf.stop_gradient",
    "PreventGradient": "tf.stop_gradient",
    "Round": "tf.round",
    "Rint": "tf.math.rint",
    "Floor": "tf.floor",
    "Ceil": "tf.math.ceil",
    "Sign": "tf.sign (zero gradient)",
}
#: Straight-through gradient ops: their gradient is a surrogate by design.
SURROGATE_OPS = (
    "FakeQuantWithMinMaxArgs",
    "FakeQuantWithMinMaxVars",
    "FakeQuantWithMinMaxVarsPerChannel",
    "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV3",
    "QuantizeAndDequantizeV4",
)
#: Ops that only move data around: their gradients are not worth a check.
TRIVIAL_OPS = {"Placeholder", "Const", "Identity", "NoOp", "ReadVariableOp", "Shape", "Size", "Rank"}
#: Probes (random u, v pairs) per op check.
PROBES = 2

_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (os.__file__, np.__file__, tf.__file__, __file__)
)


def _floating(t) -> bool:
    return t.dtype.is_floating


class ModelGraph:
    """A lazily traced graph of ``model.function`` at ``model.point``."""

    def __init__(self, model):
        self.model = model
        self._wrapped = None
        self.error: str | None = None
        self.traced = False

    def _trace(self) -> bool:
        if self._wrapped is not None or self.error is not None:
            return self._wrapped is not None
        model = self.model
        names = list(model.point)
        specs = [
            tf.TensorSpec(np.shape(model.point[n]), tf.as_dtype(np.asarray(model.point[n]).dtype), name=n)
            for n in names
        ]

        def traced(*args):
            return model.function(dict(zip(names, args)))

        try:
            self._wrapped = tf.compat.v1.wrap_function(traced, specs)
        except Exception as exc:  # not traceable in graph mode: no graph findings
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return False
        self.graph = self._wrapped.graph
        self.inputs = dict(zip(names, self._wrapped.inputs))
        structured = self._wrapped.structured_outputs
        self.outputs = {o: structured[o] for o in model.outputs}
        self.traced = True
        return True

    # -- reachability ---------------------------------------------------------

    def _forward_ops(self, name, stop_at_cuts=False) -> set:
        start = self.inputs[name].op
        seen, stack = set(), [start]
        while stack:
            op = stack.pop()
            for t in op.outputs:
                for consumer in t.consumers():
                    if consumer not in seen:
                        seen.add(consumer)
                        if not (stop_at_cuts and _cut_description(consumer)):
                            stack.append(consumer)
        return seen

    def _backward_ops(self, output) -> set:
        seen, stack = set(), [self.outputs[output].op]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
        return seen

    def path_ops(self, name, output) -> list:
        """Ops on a path from input ``name`` to ``output``, in graph (topological) order."""
        between = self._forward_ops(name) & self._backward_ops(output)
        return [op for op in self.graph.get_operations() if op in between]

    def reaches(self, name, output) -> bool:
        return self._trace() and bool(self.path_ops(name, output))

    # -- findings ---------------------------------------------------------------

    def cut_sites(self, name, output) -> list[GraphSite]:
        """Ops on the path from ``name`` to ``output`` through which no gradient flows."""
        if not self._trace():
            return []
        sites = []
        for op in self.path_ops(name, output):
            description = _cut_description(op)
            if description:
                sites.append(self.site(op, description))
        return sites[:5]

    def surrogate_sites(self, name, output) -> list[GraphSite]:
        """Straight-through ops that ``name`` reaches through more than one of their inputs."""
        if not self._trace():
            return []
        reached = self._forward_ops(name) | {self.inputs[name].op}
        sites = []
        for op in self.path_ops(name, output):
            if op.type not in SURROGATE_OPS:
                continue
            arg_names = [a.name for a in op.op_def.input_arg]
            via = [arg_names[i] if i < len(arg_names) else str(i)
                   for i, t in enumerate(op.inputs) if t.op in reached]
            if len(via) > 1:
                sites.append(self.site(
                    op, f"{op.type} at {self.location(op) or op.name} by {len(via)} paths "
                    f"({', '.join(via)})",
                ))
        return sites

    def site(self, op, description="") -> GraphSite:
        return GraphSite(op_type=op.type, op_name=op.name, location=self.location(op),
                         description=description)

    def location(self, op) -> str:
        """``file:line`` of the innermost frame of user code that created ``op``."""
        model_path = os.path.abspath(self.model.path)
        frames = list(op.traceback)
        user = [f for f in frames if os.path.abspath(f.filename) == model_path]
        if not user:
            user = [f for f in frames if not _is_library(f.filename)]
        if not user:
            return ""
        frame = user[-1]
        return f"{relative_path(frame.filename)}:{frame.lineno}"

    # -- the culprit --------------------------------------------------------------

    def culprit(self, name, output, tol) -> Culprit | None:
        """The first op on the path whose own gradient disagrees with finite differences."""
        if not self._trace():
            return None
        ops = [op for op in self.path_ops(name, output) if self._checkable(op)]
        if not ops:
            return None
        feeds = [self.inputs[n] for n in self.model.point]
        feed_values = [tf.constant(self.model.point[n]) for n in self.model.point]
        fed = {t.ref() for t in feeds}
        needed = {}
        for op in ops:
            for t in self._local_inputs(op):
                if t.ref() not in fed:
                    needed.setdefault(t.ref(), t)
        needed = list(needed.values())
        values = self._wrapped.prune(feeds, needed)(*feed_values) if needed else []
        seen = {t.ref(): v for t, v in zip(needed, values)}
        seen.update({t.ref(): v for t, v in zip(feeds, feed_values)})
        rng = np.random.default_rng(0)
        for count, op in enumerate(ops, start=1):
            try:
                found = self._check_op(op, feeds, feed_values, seen, tol, rng)
            except Exception:  # an op that cannot be fed or differenced alone: skip it
                continue
            if found is not None:
                analytic, numeric, rel = found
                return Culprit(
                    site=self.site(op, _describe(op)),
                    definition=_custom_definition(op),
                    analytic=analytic,
                    numeric=numeric,
                    rel_error=rel,
                    checked_ops=count,
                )
        return None

    def _checkable(self, op) -> bool:
        if op.type in TRIVIAL_OPS or op.type in SURROGATE_OPS or _cut_description(op):
            return False
        if not any(_floating(t) for t in self._local_outputs(op)):
            return False
        return any(_floating(t) for t in self._local_inputs(op))

    def _local_inputs(self, op):
        n = _custom_result_count(op)
        inputs = list(op.inputs)
        if n is not None:  # custom gradient: the decorated function's arguments
            inputs = inputs[n:]
        return [t for t in inputs if _floating(t)]

    def _local_outputs(self, op):
        n = _custom_result_count(op)
        outputs = list(op.outputs)
        if n is not None:
            outputs = outputs[:n]
        return [t for t in outputs if _floating(t)]

    def _check_op(self, op, feeds, feed_values, seen, tol, rng):
        from gradcli.numerics.finite_diff import FiniteDifferences

        xs, ys = self._local_inputs(op), self._local_outputs(op)
        with self.graph.as_default():
            seeds = [tf.compat.v1.placeholder(y.dtype, y.shape) for y in ys]
            # Partial derivatives: an op whose inputs depend on each other
            # (z / (1 + |z|)) is differenced with each input fed on its own,
            # so the tape must hold the other inputs constant too.
            grads = tf.gradients(ys, xs, grad_ys=seeds, stop_gradients=xs)
        xs_grads = [(x, g) for x, g in zip(xs, grads) if g is not None]
        if not xs_grads:
            return None
        xs = [x for x, _ in xs_grads]
        fed_refs = {t.ref() for t in feeds}
        extra = [x for x in xs if x.ref() not in fed_refs]
        forward = self._wrapped.prune(feeds + extra, ys)
        backward = self._wrapped.prune(feeds + extra + seeds, [g for _, g in xs_grads])
        base = {f"in{i}": np.asarray(seen[x.ref()]) for i, x in enumerate(xs)}
        base_feeds = {t.ref(): v for t, v in zip(feeds, feed_values)}

        def function(values):
            fed = dict(base_feeds)
            for i, x in enumerate(xs):
                fed[x.ref()] = values[f"in{i}"]
            result = forward(*[fed[t.ref()] for t in feeds + extra])
            return {f"out{j}": tf.convert_to_tensor(r) for j, r in enumerate(result)}

        out_values = function({k: tf.constant(v) for k, v in base.items()})
        # A handful of points per probe: eager calls of the pruned graph are
        # cheaper than tracing a vectorized batch for every op.
        fd = FiniteDifferences(function, base, list(out_values), eager=True)
        worst = None
        for _ in range(PROBES):
            v = {o: rng.standard_normal(np.shape(val)) for o, val in out_values.items()}
            u = {k: rng.standard_normal(np.shape(val)) for k, val in base.items()}
            fed = dict(base_feeds)
            for i, x in enumerate(xs):
                fed[x.ref()] = tf.constant(base[f"in{i}"])
            seed_values = [tf.cast(v[f"out{j}"], ys[j].dtype) for j in range(len(ys))]
            jtv = backward(*[fed[t.ref()] for t in feeds + extra], *seed_values)
            analytic = sum(float(np.sum(np.asarray(g) * u[f"in{i}"])) for i, g in enumerate(jtv))
            numeric, error, ju_norm = 0.0, 0.0, 0.0
            for k in base:
                d = fd.along(k, u[k][None])
                for o in out_values:
                    ju = d.values[o][0]
                    numeric += float(np.sum(v[o] * ju))
                    error += float(np.sum(np.abs(v[o]) * d.errors[o][0]))
                    ju_norm += float(np.sum(ju**2))
            v_norm = np.sqrt(sum(float(np.sum(x**2)) for x in v.values()))
            u_norm = np.sqrt(sum(float(np.sum(x**2)) for x in u.values()))
            g_norm = np.sqrt(sum(float(np.sum(np.asarray(g) ** 2)) for g in jtv))
            scale = max(v_norm * np.sqrt(ju_norm), u_norm * g_norm)
            pair = compare.compare_projections(
                "in", "out", np.array([analytic]), np.array([numeric]), np.array([numeric]),
                np.array([error]), np.array([scale]), tol,
            )
            if pair.failed and pair.verdict == "mismatch":
                rel = abs(analytic - numeric) / max(scale, np.finfo(float).tiny)
                if worst is None or rel > worst[2]:
                    worst = (analytic, numeric, rel)
        return worst


def _custom_result_count(op) -> int | None:
    """For a ``tf.custom_gradient`` IdentityN: how many of its tensors are results."""
    if op.type != "IdentityN":
        return None
    grad_fn = _custom_grad_fn(op)
    if grad_fn is None:
        return None
    cells = _closure(grad_fn)
    return cells.get("flat_result_len")


def _custom_grad_fn(op):
    from tensorflow.python.framework import ops as tf_ops

    try:
        registered = tf_ops.get_gradient_function(op)
    except Exception:
        return None
    if registered is None:
        return None
    inner = _closure(registered).get("tape_grad_fn")
    return inner


def _closure(fn) -> dict:
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    cells = {}
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    return cells


def _custom_definition(op) -> str:
    """``file:line`` of the ``def`` of the function decorated with ``tf.custom_gradient``."""
    tape_grad_fn = _custom_grad_fn(op)
    if tape_grad_fn is None:
        return ""
    user_grad = _closure(tape_grad_fn).get("grad_fn")
    code = getattr(user_grad, "__code__", None)
    if code is None:
        return ""
    line = _enclosing_def(code.co_filename, code.co_firstlineno) or code.co_firstlineno
    return f"{relative_path(code.co_filename)}:{line}"


@lru_cache(maxsize=32)
def _parsed(path):
    try:
        with open(path) as handle:
            return ast.parse(handle.read())
    except (OSError, SyntaxError):
        return None


def _enclosing_def(path: str, line: int) -> int | None:
    """The line of the innermost function around ``line`` decorated with a
    ``custom_gradient`` (else the innermost function enclosing it)."""
    tree = _parsed(path)
    if tree is None:
        return None
    best, best_decorated = None, None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno < line <= (
            node.end_lineno or node.lineno
        ):
            decorated = any("custom_gradient" in ast.unparse(d) for d in node.decorator_list)
            if decorated and (best_decorated is None or node.lineno > best_decorated):
                best_decorated = node.lineno
            if best is None or node.lineno > best:
                best = node.lineno
    return best_decorated or best


def _cut_description(op) -> str:
    if op.type in CUT_OPS:
        return CUT_OPS[op.type]
    if op.type == "Cast":
        dst = op.get_attr("DstT")
        if not dst.is_floating and not dst.is_complex:
            return f"a cast to {dst.name} (tf.cast)"
        return ""
    floating_in = any(_floating(t) for t in op.inputs)
    if floating_in and op.outputs and not any(_floating(t) for t in op.outputs):
        return f"{op.type} (integer or bool output)"
    return ""


def _describe(op) -> str:
    if _custom_result_count(op) is not None:
        grad_fn = _closure(_custom_grad_fn(op)).get("grad_fn")
        qual = getattr(grad_fn, "__qualname__", "")
        owner = qual.split(".<locals>")[0] if ".<locals>" in qual else qual
        return f"tf.custom_gradient {owner}".strip()
    return op.type


def _is_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        path.startswith(_LIBRARY_DIRS)
        or "site-packages" in path
        or filename.startswith("<")
        or path.startswith(sys.prefix)
    )
