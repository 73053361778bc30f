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
  verdict rule is ``compare.compare_projections`` with the check's tolerance
  (or the op's dtype's, if looser); the first op with a ``mismatch`` is the
  culprit. A ``tf.custom_gradient`` op is checked as the whole decorated
  function (its arguments to its results) and the report names the line of the
  decorated function's ``def``; the ops of its forward code are never checked
  (backpropagation does not use their gradients).
  Each local check is validated before it may blame: its inputs are distinct
  tensors (``x * x`` is one variable), its gradient is the op's partial
  derivative (``stop_gradients``), the pruned op reproduces the outputs the
  model computed, it runs with the steps and tolerance of the op's coarsest
  dtype, and only a resolved ``mismatch`` (not ``inconclusive``) counts.
* ``none_gradient_sites``: for a disconnected input, the ops on the path whose
  registered gradient returns None for the input the path enters by.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
from functools import lru_cache

import numpy as np

from gradcli.errors import error_line
from gradcli.numerics.autodiff import functions_run_eagerly, graph_gradients
from gradcli.verdicts import compare
from gradcli.model.core import first_line
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
#: Branch points of ops whose boundary is fixed (see ``ModelGraph.boundaries``).
FIXED_BOUNDARIES = {"Relu": (0.0,), "Relu6": (0.0, 6.0), "LeakyRelu": (0.0,), "Elu": (0.0,),
                    "Selu": (0.0,), "Abs": (0.0,)}
#: Probes (random u, v pairs) per op check.
PROBES = 2


def _scaled_to(magnitude):
    """x scaled so its largest element has ``magnitude`` (sign pattern kept);
    an all-zero x becomes that constant."""
    def at(x):
        top = float(np.max(np.abs(x))) if np.size(x) else 0.0
        return np.full_like(x, magnitude) if top == 0 else x * (magnitude / top)
    return at


def _written_by_user(op) -> bool:
    """Whether ``op``'s gradient (a custom gradient's function, an override's
    registered function) is defined in the user's files, not a library's."""
    from gradcli.model.core import is_user_file

    override = _override(op)
    where = _gradient_definition(op) if _custom_result_count(op) is not None else (
        override[1].rsplit(" at ", 1)[-1] if override and override[1] else "")
    return bool(where) and is_user_file(where.rsplit(":", 1)[0])


def _spread_draw(magnitude):
    """Seeded uniform values in [-magnitude, magnitude]: every sign pattern,
    not only the point's (seeded by the values, so two inputs differ)."""
    def at(x):
        seed = int.from_bytes(np.asarray(x).tobytes()[:8].ljust(8, b"\0"), "little")
        return np.random.default_rng([seed, np.size(x)]).uniform(-magnitude, magnitude, np.shape(x))
    return at


def _nearby(at):
    """``at``'s point moved by a relative 1e-3 (seeded): the spread's second
    look, which a kink met exactly at the point does not survive."""
    def moved(x):
        point = np.asarray(at(x), np.float64)
        u = np.random.default_rng(2).uniform(-1.0, 1.0, np.shape(point))
        return point + 1e-3 * u * np.maximum(1.0, np.abs(point))
    return moved


#: The spread a user-written gradient is checked over besides its own inputs
#: (``ModelGraph.spread_culprit``): the inputs with their signs flipped, scaled
#: so the largest is 3 and 10 in magnitude (both signs), and seeded uniform
#: draws in [-3, 3] and [-10, 10]. Why these: activations of a model at its
#: point usually lie within a few units, so a gradient wrong only beyond the
#: range the point reaches (|x| > 2) is met at 3 and 10; the flipped and
#: uniform points reach the sign patterns the point does not. Points outside
#: the function's domain (log, sqrt of a negative: NaN) give no verdict.
SPREAD_POINTS = [
    ("its inputs negated", lambda x: -x),
    ("its inputs scaled to magnitude 3", _scaled_to(3.0)),
    ("its inputs scaled to magnitude -3", _scaled_to(-3.0)),
    ("its inputs scaled to magnitude 10", _scaled_to(10.0)),
    ("its inputs scaled to magnitude -10", _scaled_to(-10.0)),
    ("uniform draws in [-3, 3]", _spread_draw(3.0)),
    ("uniform draws in [-10, 10]", _spread_draw(10.0)),
]

_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (os.__file__, np.__file__, tf.__file__, os.path.dirname(__file__))  # .../gradcli/
)


def _floating(t) -> bool:
    return t.dtype.is_floating


def _holds_calls(graph) -> bool:
    """Whether a graph calls a function (a ``tf.function`` traced as a call)."""
    return any(op.type in ("PartitionedCall", "StatefulPartitionedCall") for op in graph.get_operations())


class ModelGraph:
    """A lazily traced graph of ``model.function`` at ``model.point``."""

    def __init__(self, model):
        self.model = model
        self._wrapped = None
        self.error: str | None = None
        self.traced = False
        self._called = None  # the trace with tf.function calls kept, when the graph inlined them
        self.run_note: str | None = None  # why ``callable`` gave no graph to run

    #: whether the model's function calls ``tf.function``s (``_trace``)
    calls_functions = False

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

        # tf.function bodies are inlined (run_functions_eagerly), so their ops
        # (and a custom gradient inside one) are ops of this graph rather than
        # one opaque PartitionedCall; a body that needs autograph then fails,
        # and stays traced as a call. The switch is process-wide (another
        # thread's tf.functions would run eagerly meanwhile: the joint check
        # beside the layer pass), so it is thrown only for a graph that holds
        # a call: without one, both traces are the same graph.
        error = None
        for inline in (False, True):
            try:
                with functions_run_eagerly() if inline else contextlib.nullcontext():
                    wrapped = tf.compat.v1.wrap_function(traced, specs)
            except Exception as exc:  # not traceable in graph mode: no graph findings
                error = f"{type(exc).__name__}: {error_line(exc)}"
                continue
            if inline:
                self._called = self._wrapped
            self._wrapped = wrapped
            if inline or not _holds_calls(wrapped.graph):
                break
            self.calls_functions = True  # the model runs tf.functions (traced as calls)
        if self._wrapped is None:
            self.error = error
            return False
        self.graph = self._wrapped.graph
        self.inputs = dict(zip(names, self._wrapped.inputs))
        structured = self._wrapped.structured_outputs
        self.outputs = {o: structured[o] for o in model.outputs}
        self.traced = True
        return True

    def callable(self):
        """The traced graph as the model's function (dict of the point's
        tensors -> dict of outputs), or None when it cannot be traced: a call
        runs no Python of the model (``FiniteDifferences.traced``)."""
        if not self._trace():
            return None
        names = list(self.model.point)
        point = [tf.constant(self.model.point[n]) for n in names]
        # Inlining strips a tf.function's own settings: the body of a
        # ``jit_compile=True`` function (Keras' grouped convolution on CPU) may
        # not run outside XLA ("Fused conv implementation does not support
        # grouped convolutions"). So the graph runs once at the point first;
        # if it raises, the trace with the calls kept, else the model's Python.
        failure = None
        for wrapped in (self._wrapped, self._called):
            if wrapped is None:
                continue
            try:
                wrapped(*point)
            except Exception as exc:  # this trace cannot run: the next, else none
                failure = failure or exc
                continue
            if failure is not None:
                self.run_note = (
                    "the model's graph with tf.function bodies inlined does not run "
                    f"({type(failure).__name__}: {first_line(failure)}); finite differences "
                    "call its tf.functions as they are"
                )

            def function(values: dict, wrapped=wrapped) -> dict:
                return wrapped(*[values[n] for n in names])

            return function
        self.run_note = (
            f"the model's traced graph does not run ({type(failure).__name__}: {first_line(failure)}); "
            "finite differences call the model's Python"
        )
        return None

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
        return _ancestors([self.outputs[output].op], control=True)

    def path_ops(self, name, output) -> list:
        """Ops on a path from input ``name`` to ``output``, in graph (topological) order."""
        between = self._forward_ops(name) & self._backward_ops(output)
        return [op for op in self.graph.get_operations() if op in between]

    def reaches(self, name, output) -> bool:
        return self._trace() and bool(self.path_ops(name, output))

    def differentiated_ops(self) -> set:
        """Ops a gradient flows through: reached from a differentiated input along
        floating tensors (not through a cut) and reaching an output."""
        if not self._trace():
            return set()
        reached, stack = set(), [self.inputs[n].op for n in self.model.wrt if n in self.inputs]
        while stack:
            op = stack.pop()
            for t in op.outputs:
                if not _floating(t):
                    continue
                for consumer in t.consumers():
                    if consumer not in reached:
                        reached.add(consumer)
                        if not _cut_description(consumer):
                            stack.append(consumer)
        used = set().union(*(self._backward_ops(o) for o in self.outputs))
        return reached & used

    def precision(self) -> tuple[str | None, list[GraphSite]]:
        """The lowest floating precision among the tensors that carry the
        differentiated values, and the ops that lower it.

        Carrying tensors (``_value_path``): in the forward pass, the floating
        tensors on a path from a differentiated input to an output; in the
        reverse pass (``_gradient_ops``), the floating tensors on a path from a
        cotangent or a forward carrying tensor to a gradient. Constants, shapes,
        counters, random draws and other plumbing beside them never count, even
        when they are float32 and are added in (``tf.recompute_grad`` adds a
        float32 0-or-NaN built from a bool of the cotangent). The sites are the
        carrying ops with a carrying output in that dtype and no carrying input
        in it (a ``Cast``, a Keras autocast, a gradient function that casts),
        or a differentiated input of that dtype. ``(None, [])`` when the graph
        cannot be traced or no value reaches an output."""
        from gradcli.numerics.finite_diff import coarser

        if not self._trace():
            return None, []
        xs = [self.inputs[n] for n in self.model.wrt if n in self.inputs]
        ys = [t for t in self.outputs.values() if _floating(t)]
        forward = _value_path(xs, ys)
        if not forward:
            return None, []
        backward = self._gradient_ops(forward)
        carrying = {**forward, **backward}
        lowest = "float64"
        for t in carrying.values():
            lowest = coarser(lowest, t.dtype.name)
        for x in xs:
            lowest = coarser(lowest, x.dtype.name)
        sites = [self.site(x.op, f"input {x.op.name} -> {lowest}") for x in xs if x.dtype.name == lowest]
        lowered = {t.op for t in carrying.values() if t.dtype.name == lowest}
        reverse = {t.op for t in backward.values()} - {t.op for t in forward.values()}
        for op in self.graph.get_operations():
            if op not in lowered or op.type == "Placeholder" or any(
                t.ref() in carrying and t.dtype.name == lowest for t in op.inputs
            ):
                continue
            if op in reverse:
                sites.append(self._gradient_site(op, lowest))
            else:
                sites.append(self.site(op, f"{op.type} -> {lowest}"))
        return lowest, sites

    def _gradient_site(self, op, dtype: str) -> GraphSite:
        """A reverse-pass op: located by its own model-file line (a custom
        gradient's code), else by the forward op whose gradient made it."""
        model_path = os.path.abspath(self.model.path)
        if any(os.path.abspath(f.filename) == model_path for f in op.traceback):
            return self.site(op, f"{op.type} in the gradient -> {dtype}")
        match = re.match(r"(?:gradients(?:_\d+)?/)+(.+?)_grad/", op.name)
        try:
            target = self.graph.get_operation_by_name(match.group(1)) if match else None
        except (KeyError, ValueError):
            target = None
        if target is None:
            return self.site(op, f"{op.type} in the gradient -> {dtype}")
        return GraphSite(
            op_type=op.type, op_name=op.name, location=self.location(target),
            description=f"{op.type} in the gradient of {target.type} -> {dtype}",
        )

    def _gradient_ops(self, forward: dict) -> dict:
        """The carrying tensors of the reverse pass (``tf.gradients`` of the
        outputs with respect to the differentiated inputs, seeded with a
        cotangent placeholder per output): those on a floating path from a
        cotangent, a differentiated input or a forward carrying tensor
        (``forward``) to a gradient. A gradient function that computes in
        float32 rounds the analytic side as much as a float32 forward rounds the
        numeric one; its constants and the reverse pass's plumbing do not."""
        graph = self.graph
        before = set(graph.get_operations())
        ys = [t for t in self.outputs.values() if _floating(t)]
        xs = [self.inputs[n] for n in self.model.wrt if n in self.inputs]
        try:
            with graph.as_default(), graph.name_scope("gradients"):
                seeds = [tf.compat.v1.placeholder(y.dtype, y.shape, name="cotangent") for y in ys]
                grads = graph_gradients(ys, xs, grad_ys=seeds)
        except Exception:  # no gradient registered somewhere: forward dtypes only
            return {}
        ends = [g for g in grads if g is not None]
        created = {op for op in graph.get_operations() if op not in before}
        starts = seeds + xs + [t for t in forward.values()]
        return _value_path(starts, ends, within=created)

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

    def none_gradient_sites(self, name, output) -> list[GraphSite]:
        """Ops on the path from ``name`` to ``output`` whose registered gradient
        returns None (or that have none registered) for an input the path enters
        by: where a disconnected gradient is lost."""
        if not self._trace():
            return []
        path = self.path_ops(name, output)
        on_path = set(path) | {self.inputs[name].op}
        sites = []
        for op in path:
            if op.type in TRIVIAL_OPS:
                continue
            entered = [i for i, t in enumerate(op.inputs) if t.op in on_path and _floating(t)]
            ys = [t for t in op.outputs if _floating(t)]
            if not entered or not ys:
                continue
            xs = [op.inputs[i] for i in entered]
            try:
                with self.graph.as_default():
                    grads = graph_gradients(ys, xs, stop_gradients=xs)
            except LookupError:
                sites.append(self.site(op, f"{op.type} has no registered gradient"))
                continue
            except Exception:
                continue
            arg_names = [a.name for a in op.op_def.input_arg] if op.op_def else []
            lost = [
                arg_names[i] if i < len(arg_names) and len(arg_names) == len(op.inputs) else f"input {i}"
                for i, g in zip(entered, grads) if g is None
            ]
            if lost:
                sites.append(self.site(op, f"{op.type} returns no gradient for {', '.join(lost)}"))
        return sites[:5]

    def boundaries(self, name) -> list[tuple[float, str]]:
        """Constants at which an op that ``name`` reaches switches branch: the
        clip_value_min/max of ClipByValue, relu6's 0 and 6, relu's (and
        leaky relu's) 0, and the constant side of a Minimum/Maximum. Each comes
        with ``"Op at file:line"``; at most 8."""
        if not self._trace():
            return []
        found = {}
        for op in self.graph.get_operations():
            if op not in self._forward_ops(name):
                continue
            values = list(FIXED_BOUNDARIES.get(op.type, ()))
            if op.type in ("ClipByValue", "Minimum", "Maximum"):
                for t in op.inputs:
                    if t.op.type == "Const" and t.dtype.is_floating:
                        array = tf.make_ndarray(t.op.get_attr("value"))
                        values += [float(v) for v in np.unique(array)[:2]]
            for value in values:
                found.setdefault(value, f"{op.type} at {self.location(op) or op.name}")
        return list(found.items())[:8]

    def site(self, op, description="") -> GraphSite:
        return GraphSite(op_type=op.type, op_name=op.name, location=self.location(op),
                         description=description)

    def location(self, op) -> str:
        """``file:line`` of the innermost frame of user code that created ``op``."""
        model_path = os.path.abspath(self.model.path)
        frames = list(op.traceback)
        # Only frames below gradcli's own call of the model: a script that calls
        # gradcli (the API, a bench) is not where the model made the op.
        ours = [i for i, f in enumerate(frames) if os.path.abspath(f.filename).startswith(_GRADCLI_DIR)]
        frames = frames[ours[-1] + 1:] if ours else frames
        user = [f for f in frames if os.path.abspath(f.filename) == model_path]
        if not user:
            user = [f for f in frames if not _is_library(f.filename)]
        if not user:
            # Made by gradcli's call of the model itself: a tf.custom_gradient given
            # as the model is where its decorated function is defined.
            return _gradient_definition(op) if _custom_result_count(op) is not None else ""
        frame = user[-1]
        return f"{relative_path(frame.filename)}:{frame.lineno}"

    # -- the culprit --------------------------------------------------------------

    def culprit(self, name, output, tol, order: int = 1) -> Culprit | None:
        """The first op on the path whose own gradient disagrees with finite
        differences; with ``order=2``, whose gradient function's own derivative
        does (the op's gradient for a fixed random cotangent, as a function of
        the op's inputs, is the function checked)."""
        if not self._trace():
            return None
        path = self.path_ops(name, output)
        inside = self._inside_custom_gradients(path)
        ops = [op for op in path if op not in inside and self._checkable(op)]
        if not ops:
            return None
        feeds, feed_values, seen = self._seen_values(ops)
        rng = np.random.default_rng(0)
        target = self.outputs[output]
        seen[target.ref()] = np.asarray(self.model.outputs[output])
        # First each op on its own, in graph order; then, if none is wrong alone
        # (an op whose own outputs are not well defined, such as the singular
        # vectors of Svd at repeated singular values, cannot be differenced
        # alone), each op's function to the output, from the output backwards:
        # the first whose gradient to the output is wrong, after ops whose
        # gradients to the output are right, is where the error enters.
        scans = [(ops, None, "own gradient"), (ops[::-1], target, "gradient to the output")]
        if order == 2:
            scans = [(ops, None, "own gradient's derivative")]
        for op_order, to, what in scans:
            hit = self._first_wrong(op_order, feeds, feed_values, seen, tol, rng, to, order)
            if hit is not None:
                op, found, count = hit
                inner = self._inside_library_wrapper(op, feeds, feed_values, seen, tol, rng, order)
                if inner is None and order == 2:
                    inner = self._rule_inside_gradient(op, tol)
                return inner or self._culprit(op, found, count, what)
        return None

    def _first_wrong(self, ops, feeds, feed_values, seen, tol, rng, to, order):
        """(op, what convicted it, ops checked) of the first of ``ops`` whose
        gradient (to ``to``, or its own) is wrong (``_check_op``), or None."""
        for count, op in enumerate(ops, start=1):
            try:
                found = self._check_op(op, feeds, feed_values, seen, tol, rng, to, order)
            except Exception:  # an op that cannot be fed or differenced alone: skip it
                continue
            if found is not None:
                return op, found, count
        return None

    def user_gradient_ops(self, name, output) -> list:
        """The gradients the user wrote on the path from ``name`` to ``output``:
        ``tf.custom_gradient`` functions (a Keras layer's included) and ops
        whose gradient a ``gradient_override_map`` replaced, defined in the
        user's own files (a library's, such as ``tf.nn.silu``'s custom
        gradient, is the library's: an EfficientNet holds dozens)."""
        if not self._trace():
            return []
        path = self.path_ops(name, output)
        inside = self._inside_custom_gradients(path)
        return [
            op for op in path
            if op not in inside and (_custom_result_count(op) is not None or _override(op) is not None)
            and self._checkable(op) and _written_by_user(op)
        ]

    def spread_culprit(self, name, output, tol) -> tuple | None:
        """The first user-written gradient on the path that is wrong at the
        inputs it receives or at a spread of inputs around them
        (``SPREAD_POINTS``, docs/verdict-rules.md): ``(Culprit, point)`` or None.

        A gradient the user wrote is checked where the model sends it and
        beyond, since a check at one point sees only the range the point's
        activations cover (a gradient wrong only for |x| > 2 passes at inputs
        within 1). Each op is checked alone, by ``_check_op``'s probes, at each
        spread point (the point itself is the pair's own check); a point where
        the op or its differences are not finite is outside its domain and
        skipped. A disagreement convicts only when it holds again at a point
        moved by a relative 1e-3 (``_nearby``): a kink met exactly at a spread
        point (a custom relu at a zero) disagrees at that point alone."""
        ops = self.user_gradient_ops(name, output)
        if not ops:
            return None
        memo = self.__dict__.setdefault("_spread_memo", {})  # (op, inputs) -> finding: pairs share ops
        feeds, feed_values, seen = self._seen_values(ops)
        start = self.inputs[name].op
        for count, op in enumerate(ops, start=1):
            # Only the op's inputs that ``name`` reaches: its gradient with
            # respect to the others is another pair's (a custom matmul wrong in
            # its kernel gradient must not fail the data input's pair).
            only = {x.ref() for x in self._local_inputs(op) if self._depends_on(x.op, {start})}
            key = (op.name, tuple(sorted(x.name for x in self._local_inputs(op) if x.ref() in only)))
            if key in memo:
                if memo[key] is not None:
                    return memo[key]
                continue
            memo[key] = None
            for label, at in SPREAD_POINTS:
                found = None
                for where in (at, _nearby(at)):
                    try:
                        found = self._check_op(op, feeds, feed_values, seen, tol,
                                               np.random.default_rng(0), at=where, only=only)
                    except Exception:  # an op that cannot be fed or differenced alone
                        found = None
                    if found is None or isinstance(found, _WrongShape):
                        found = None
                        break
                if found is not None:
                    memo[key] = self._culprit(op, found, count, f"own gradient at {label}"), label
                    return memo[key]
        return None

    def _differentiated_ops(self) -> list:
        """The checkable ops on any differentiated path, in graph order (the
        forward code inside a custom gradient left out: its gradient is the
        rule's)."""
        path = set()
        for name in self.model.wrt:
            for output in self.outputs:
                if name in self.inputs:
                    path |= set(self.path_ops(name, output))
        ordered = [op for op in self.graph.get_operations() if op in path]
        inside = self._inside_custom_gradients(ordered)
        return [op for op in ordered if op not in inside and self._checkable(op)]

    def nondeterministic_gradient(self) -> GraphSite | None:
        """The first op on a differentiated path whose own gradient, run twice
        at the values the op saw with the same cotangent (ones), gives two
        different results: a random op or state inside a gradient function."""
        if not self._trace():
            return None
        ops = self._differentiated_ops()
        try:
            feeds, feed_values, seen = self._seen_values(ops)
        except Exception:  # the model cannot be run in graph form: no search
            return None
        for op in ops:
            xs, ys = self._local_inputs(op), self._local_outputs(op)
            try:
                with self.graph.as_default():
                    grads = [g for g in graph_gradients(ys, xs, grad_ys=[tf.ones_like(y) for y in ys],
                                                        stop_gradients=xs) if g is not None]
                if not grads:
                    continue
                fed_refs = {t.ref() for t in feeds}
                extra = [x for x in xs if x.ref() not in fed_refs]
                run = self._wrapped.prune(feeds + extra, grads)
                values = list(feed_values) + [tf.constant(seen[x.ref()]) for x in extra]
                first, second = run(*values), run(*values)
            except Exception:  # noqa: BLE001 - an op that cannot be run alone says nothing
                continue
            if any(not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
                   for a, b in zip(first, second)):
                return self.site(op, self.describe_op(op))
        return None

    def forward_rule_missing(self, name, output) -> GraphSite | None:
        """The first op on the path whose forward mode TensorFlow cannot take:
        forward mode transposes an op's gradient, so it needs the gradient of
        that gradient with respect to the cotangent, and an op whose gradient
        has none (``ResizeBilinear``'s ``ResizeBilinearGrad``) stops it."""
        if not self._trace():
            return None
        for op in self.path_ops(name, output):
            xs, ys = self._local_inputs(op), self._local_outputs(op)
            if not xs or not ys or op.type in TRIVIAL_OPS:
                continue
            try:
                with self.graph.as_default():
                    seeds = [tf.compat.v1.placeholder(y.dtype, y.shape) for y in ys]
                    grads = [g for g in graph_gradients(ys, xs, grad_ys=seeds, stop_gradients=xs)
                             if g is not None]
                    if grads and all(g is None for g in graph_gradients(grads, seeds)):
                        return self.site(op, self.describe_op(op))  # declared not differentiable
            except LookupError:  # no gradient registered for the gradient's ops
                return self.site(op, self.describe_op(op))
            except Exception:  # noqa: BLE001 - an op that cannot be differentiated here says nothing
                continue
        return None

    def forward_culprit(self, name, output, probe) -> Culprit | None:
        """Where forward mode parts from reverse mode: TensorFlow's forward mode
        differentiates the forward ops of a ``tf.custom_gradient`` (and
        transposes registered gradients, so those agree with reverse mode),
        while reverse mode runs its gradient function. A wrong JVP with a right
        VJP therefore lives in a custom gradient on the path whose forward code
        is not differentiable as written (a ``stop_gradient``, a rounding, a
        ``py_function``); the outermost one on the path is named, with the
        probe that showed it (``probe``: (forward, numeric))."""
        if not self._trace():
            return None
        path = self.path_ops(name, output)
        inside = self._inside_custom_gradients(path)
        custom = [op for op in path if op not in inside and _custom_result_count(op) is not None]
        if not custom:
            return None
        op = custom[0]
        forward, numeric = probe
        others = f" ({len(custom) - 1} more custom gradient(s) on the path)" if len(custom) > 1 else ""
        site = self.site(op, f"{self.describe_op(op)}: forward mode differentiates its forward ops, "
                             f"reverse mode runs its gradient function{others}")
        return Culprit(
            site=site, definition=_gradient_definition(op), analytic=forward, numeric=numeric,
            rel_error=abs(forward - numeric) / max(abs(numeric), abs(forward), np.finfo(float).tiny),
            checked_ops=len(custom), checked="forward ops' derivative",
        )

    def _inside_library_wrapper(self, op, feeds, feed_values, seen, tol, rng, order):
        """A ``tf.custom_gradient`` defined by a library, not the model file
        (``tf.recompute_grad``'s wrapper, a Keras utility), only passes its
        gradient through to the code it wraps: the code at fault is inside it.
        Its forward ops are checked one by one, in graph order, nested custom
        gradients as wholes; the first wrong one is the culprit, with the
        wrapper named. None when the wrapper is the user's or nothing inside
        is wrong on its own."""
        from gradcli.model.core import is_user_file

        definition = _gradient_definition(op)
        if _custom_result_count(op) is None or not definition:
            return None
        if is_user_file(definition.rsplit(":", 1)[0]):
            return None
        region = [o for o in self.graph.get_operations() if o in self._inside_custom_gradients([op])]
        nested = self._inside_custom_gradients(region)
        inner = [o for o in region if o not in nested and self._checkable(o)]
        try:
            feeds, feed_values, seen = self._seen_values(inner)
        except Exception:  # the region cannot be run in graph form: blame the wrapper
            return None
        hit = self._first_wrong(inner, feeds, feed_values, seen, tol, rng, None, order)
        if hit is None:
            return None
        culprit = self._culprit(*hit, "own gradient")
        library = definition.split("site-packages" + os.sep)[-1]
        culprit.site.description += f", inside {_describe(op)} (a library wrapper, {library})"
        return culprit

    def _rule_inside_gradient(self, op, tol) -> Culprit | None:
        """At order 2, the innermost rule at fault: ``op``'s gradient function
        (for a fixed random cotangent) may itself call gradients the user wrote
        (a custom gradient calling a custom-gradient function); the first of
        them whose own first-order gradient is wrong is where the second
        derivative goes wrong, not ``op`` that calls it. None when none is."""
        rng = np.random.default_rng(0)
        before = set(self.graph.get_operations())
        try:
            self._first_gradients(self._local_inputs(op), self._local_outputs(op), rng)
        except Exception:  # noqa: BLE001 - a gradient that cannot be built here says nothing
            return None
        created = [o for o in self.graph.get_operations() if o not in before]
        nested = self._inside_custom_gradients(created)
        rules = [
            o for o in created if o not in nested and self._checkable(o)
            and (_custom_result_count(o) is not None or _override(o) is not None)
        ]
        if not rules:
            return None
        try:
            feeds, feed_values, seen = self._seen_values(rules)
        except Exception:  # noqa: BLE001 - the gradient's ops cannot be run alone
            return None
        hit = self._first_wrong(rules, feeds, feed_values, seen, tol, rng, None, 1)
        if hit is None:
            return None
        return self._culprit(*hit, f"own gradient, called in the gradient of {_describe(op)}")

    def rules_in_body(self, op) -> list:
        """The gradients the user wrote (``tf.custom_gradient``, overrides)
        inside the functions ``op`` runs: a while loop's body and condition,
        a function call's body, recursively. An LSTM or a loop of the user's
        is one ``While`` op in the graph; when its gradient is wrong, these are
        the code inside it that defines gradients of its own (TensorFlow's
        registered gradients are taken as right)."""
        found, stack, seen = [], [op], set()
        while stack:
            current = stack.pop()
            for attr in ("body", "cond", "f", "then_branch", "else_branch"):
                try:
                    name = current.get_attr(attr).name
                except Exception:  # noqa: BLE001 - no such attribute on this op
                    continue
                if name in seen:
                    continue
                seen.add(name)
                function = self.graph._get_function(name) if hasattr(self.graph, "_get_function") else None
                body = getattr(function, "graph", None)
                if body is None:
                    continue
                for inner in body.get_operations():
                    if _custom_result_count(inner) is not None or _override(inner) is not None:
                        found.append(inner)
                    stack.append(inner)
        return found

    def _culprit(self, op, found, count, what) -> Culprit:
        """The culprit record of ``op``: what it is (``describe_op``), where its
        gradient is defined, and the probe that convicted it (NaN for a
        gradient of the wrong shape, which no probe can be formed from)."""
        description = self.describe_op(op)
        rules = self.rules_in_body(op)
        if rules:  # a loop or call whose own gradient is wrong: the user's rules inside it
            description += ", whose body holds " + ", ".join(dict.fromkeys(  # once each
                f"{_describe(r)} at {self.location(r) or r.name}"
                + (f" (defined at {_gradient_definition(r)})" if _gradient_definition(r) else "")
                for r in rules
            ))
        if isinstance(found, _WrongShape):
            arg = _input_label(op, found.index)
            return Culprit(
                site=self.site(op, f"{description} returns a gradient of shape {found.got} "
                                   f"for {arg} of shape {found.expected}"),
                definition=_gradient_definition(op), analytic=float("nan"),
                numeric=float("nan"), rel_error=float("inf"), checked_ops=count,
                checked="gradient's shape",
            )
        # The probe was chosen by its error relative to the probe's scale
        # (``_check_op``); the report gives it relative to the two values shown,
        # as an element's (``compare``), so a reader can recompute it.
        analytic, numeric, _ = found
        rel = abs(analytic - numeric) / max(abs(analytic), abs(numeric), np.finfo(float).tiny)
        return Culprit(
            site=self.site(op, description), definition=_gradient_definition(op),
            analytic=analytic, numeric=numeric, rel_error=rel, checked_ops=count, checked=what,
        )

    def describe_op(self, op) -> str:
        """What to call ``op`` in a report: the op type (or ``tf.custom_gradient
        NAME``), whether a ``gradient_override_map`` replaced its registered
        gradient and by which function, and the Keras layer whose ``call`` made
        it (``keras_layer``)."""
        text = _describe(op)
        override = _override(op)
        if override is not None:
            name, function = override
            text += f", its gradient overridden by registered gradient '{name}'"
            if function:
                text += f" ({function})"
        layer = self.keras_layer(op) or self._scope_layer(op)
        if layer:
            text += f" in {layer}"
        return text

    def _scope_layer(self, op) -> str:
        """``Keras layer 'NAME'`` for an op no line of the user's code made (a
        built-in layer's, an LSTM's ``While``): the model's layer named by the
        op's name scope, so a report never ends at an op with nothing to find
        it by. "" when the op has a line or no scope names a layer."""
        if self.location(op):
            return ""
        names = _layer_names(self.model)
        for scope in op.name.split("/")[:-1]:
            for name in (scope, re.sub(r"_\d+$", "", scope)):
                if name in names:
                    return f"Keras layer '{name}'"
        return ""

    def keras_layer(self, op) -> str:
        """``Keras layer 'NAME' (Class.call)`` when ``op`` was made in the ``call``
        of a layer class written in the model file, ``Class.method`` when in
        another method of a class there (a tf.Module's ``__call__``), else "". The class comes
        from the model-file frame's enclosing ``class`` (its ``call``), the name
        from the op's outermost name scope matched against the model's layers
        (a graph may append ``_1`` to a scope already used)."""
        model_path = os.path.abspath(self.model.path)
        frames = [f for f in op.traceback if os.path.abspath(f.filename) == model_path]
        owner = next(
            (c for c in (_enclosing_class(f.filename, f.lineno) for f in reversed(frames)
                         if f.name != "<module>") if c), None,
        )
        if owner is None:
            return ""
        scopes = [s for s in op.name.split("/")[:-1] if s]
        names = _layer_names(self.model)
        layer = next((s for s in scopes if s in names), None)
        if layer is None:
            stripped = [re.sub(r"_\d+$", "", s) for s in scopes]
            layer = next((s for s in stripped if s in names), None)
        if layer is None and not owner.endswith(".call"):  # a tf.Module's __call__: no Keras layer
            return owner
        if layer is None:
            layer = re.sub(r"_\d+$", "", scopes[0]) if scopes else None
        return f"Keras layer '{layer}' ({owner})" if layer else f"Keras layer {owner}"

    def _seen_values(self, ops):
        """The model's inputs (``feeds``), their values, and ``seen``: tensor ref ->
        the value each local input and output of ``ops`` had at the point."""
        feeds = [self.inputs[n] for n in self.model.point]
        feed_values = [tf.constant(self.model.point[n]) for n in self.model.point]
        fed = {t.ref() for t in feeds}
        needed = {}
        for op in ops:
            for t in self._local_inputs(op) + self._local_outputs(op):
                if t.ref() not in fed:
                    needed.setdefault(t.ref(), t)
        needed = list(needed.values())
        values = self._wrapped.prune(feeds, needed)(*feed_values) if needed else []
        seen = {t.ref(): v for t, v in zip(needed, values)}
        seen.update({t.ref(): v for t, v in zip(feeds, feed_values)})
        return feeds, feed_values, seen

    # -- the op whose gradient raised ---------------------------------------------

    def raising_gradient(self, exc: BaseException) -> GraphSite | None:
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
            return self.site(hint[1], self.describe_op(hint[1]))
        if not self._trace():
            if hint is not None and hint[0] == "type":
                return GraphSite(op_type=hint[1], op_name="", location="", description=hint[1])
            return None
        ops = self._differentiated_ops()[::-1]
        if hint is not None:
            matches = [op for op in ops if _matches_hint(op, hint)]
            if matches:
                return self.site(matches[0], self.describe_op(matches[0]))
            if hint[0] == "type":
                return GraphSite(op_type=hint[1], op_name="", location="", description=hint[1])
        try:
            feeds, feed_values, seen = self._seen_values(ops)
        except Exception:  # the model cannot be run in graph form: no search
            return None
        for op in ops:
            if self._gradient_raises(op, feeds, feed_values, seen):
                return self.site(op, self.describe_op(op))
        return None

    def _gradient_raises(self, op, feeds, feed_values, seen) -> bool:
        """Whether ``op``'s own gradient raises when built, or when run at the
        values the op saw with a cotangent of ones."""
        xs, ys = self._local_inputs(op), self._local_outputs(op)
        try:
            with self.graph.as_default():
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
            backward = self._wrapped.prune(feeds + extra + seeds, [getattr(g, "values", g) for _, g in pairs])
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

    def _inside_custom_gradients(self, path) -> set:
        """Ops of the forward code of a ``tf.custom_gradient`` (between its
        arguments and its results): backpropagation never calls their gradients,
        the decorated function's gradient replaces them, so they cannot be the
        culprit (a correct ``x * x`` there must not be blamed)."""
        inside = set()
        for op in path:
            n = _custom_result_count(op)
            if n is None:
                continue
            results = {t.op for t in op.inputs[:n]}
            args = list(op.inputs[n:])
            below = _ancestors(results)
            arg_ops = {t.op for t in args}
            for o in below:
                if o not in arg_ops and self._depends_on(o, arg_ops):
                    inside.add(o)
        return inside

    @staticmethod
    def _depends_on(op, targets) -> bool:
        seen, stack = set(), [op]
        while stack:
            o = stack.pop()
            if o in targets:
                return True
            if o in seen:
                continue
            seen.add(o)
            stack.extend(t.op for t in o.inputs)
        return False

    def _checkable(self, op) -> bool:
        if op.type in TRIVIAL_OPS or op.type in SURROGATE_OPS or _cut_description(op):
            return False
        if not any(_floating(t) for t in self._local_outputs(op)):
            return False
        return any(_floating(t) for t in self._local_inputs(op))

    def _local_inputs(self, op):
        """The op's distinct floating inputs: an input fed twice (``x * x``) is one
        variable of the local function, perturbed once."""
        n = _custom_result_count(op)
        inputs = list(op.inputs)
        if n is not None:  # custom gradient: the decorated function's arguments
            inputs = inputs[n:]
        distinct = {}
        for t in inputs:
            if _floating(t):
                distinct.setdefault(t.ref(), t)
        return list(distinct.values())

    def _local_outputs(self, op):
        n = _custom_result_count(op)
        outputs = list(op.outputs)
        if n is not None:
            outputs = outputs[:n]
        return [t for t in outputs if _floating(t)]

    @staticmethod
    def _reproduces(ys, out_values, seen) -> bool:
        """Validation of a local check: the pruned op, fed the values the model
        fed it, gives back the outputs it gave in the model (to its dtype's
        round-off). It does not when feeding misses a dependency (a stateful or
        random op, an input read through a side channel)."""
        from gradcli.numerics.finite_diff import machine_eps

        for j, y in enumerate(ys):
            expected = seen.get(y.ref())
            if expected is None:
                continue
            got, expected = np.asarray(out_values[f"out{j}"]), np.asarray(expected)
            if got.shape != expected.shape:
                return False
            scale = np.maximum(np.abs(expected).max(initial=0.0), np.finfo(float).tiny)
            if np.abs(got.astype(float) - expected.astype(float)).max(initial=0.0) > (
                64 * machine_eps(y.dtype.name) * scale
            ):
                return False
        return True

    def _first_gradients(self, xs, ys, rng) -> list:
        """The op's gradient J^T w for a fixed standard normal cotangent w (seeded):
        tensors of the graph that depend on the op's inputs ``xs`` through the
        op's gradient function (a custom gradient's closure included)."""
        with self.graph.as_default():
            w = [tf.constant(rng.standard_normal(y.shape.as_list()), y.dtype) for y in ys]
            grads = graph_gradients(ys, xs, grad_ys=w, stop_gradients=xs)
        return [g for g in grads if g is not None and _floating(g)]

    @staticmethod
    def _op_input_index(op, x) -> int:
        """Position of ``x`` among the op's inputs (a custom gradient's arguments)."""
        inputs = list(op.inputs)[_custom_result_count(op) or 0:]
        return next((i for i, t in enumerate(inputs) if t.ref() == x.ref()), 0)

    def _check_op(self, op, feeds, feed_values, seen, tol, rng, to=None, order=1, at=None, only=None):
        """The op's gradient against differences of the op alone, or with ``to``
        (a model output) of the function from the op's inputs to ``to``; with
        ``order=2`` the function is the op's gradient (``_first_gradients``).
        ``at``: a function of the op's input values (as it saw them) giving the
        input values to check it at instead (the spread, ``spread_culprit``);
        a point where the op's values or differences are not finite is outside
        its domain and gives no verdict. ``only``: the op's inputs to check
        (the others held at their values), all when None."""
        from gradcli.numerics.finite_diff import FiniteDifferences

        xs, ys = self._local_inputs(op), ([to] if to is not None else self._local_outputs(op))
        if only is not None:
            xs = [x for x in xs if x.ref() in only]
        shape_rule = to is None and order == 1  # an op's own first-order gradient
        if order == 2:
            ys = self._first_gradients(xs, ys, rng)
            if not ys:
                return None
        with self.graph.as_default():
            seeds = [tf.compat.v1.placeholder(y.dtype, y.shape) for y in ys]
            # stop_gradients: partial derivatives of this op alone; without it an
            # input that also reaches another input ((a - b)**2 * a) would get
            # its total derivative, which the local differences do not see.
            # Second order: a gradient function that hides its dependence on an
            # input (tf.stop_gradient inside it) has no derivative to TensorFlow,
            # which means 0 (``unconnected_gradients``), checked like any value.
            unconnected = "zero" if order == 2 else "none"
            try:
                grads = graph_gradients(ys, xs, grad_ys=seeds, stop_gradients=xs,
                                        unconnected=unconnected)
            except ValueError as exc:  # graph mode checks a gradient's static shape
                wrong = _WrongShape.parse(str(exc), op) if shape_rule else None
                if wrong is None:
                    raise
                return wrong
        if shape_rule:  # shapes known only when run are checked when run (below)
            for i, (x, g) in enumerate(zip(xs, grads)):
                if g is not None and not g.shape.is_compatible_with(x.shape):
                    return _WrongShape(self._op_input_index(op, x), _shape_text(x.shape),
                                       _shape_text(g.shape))
        xs_grads = [(x, g) for x, g in zip(xs, grads) if g is not None]
        if not xs_grads:
            return None
        xs = [x for x, _ in xs_grads]
        fed_refs = {t.ref() for t in feeds}
        extra = [x for x in xs if x.ref() not in fed_refs]
        # The op's own derivative holds its other inputs (a select's condition,
        # an index) at the values they had: recomputed from a moved input, a
        # condition ``x != 0`` would flip at a padded zero, and the op's local
        # function would jump where its derivative is what its rule says.
        held = [
            t for t in op.inputs
            if to is None and not _floating(t) and t.dtype not in (tf.resource, tf.variant)
            and t.ref() not in fed_refs and self._depends_on(t.op, {x.op for x in xs})
        ]
        held_values = list(self._wrapped.prune(feeds, held)(*feed_values)) if held else []
        forward = self._wrapped.prune(feeds + extra + held, ys)
        backward = self._wrapped.prune(feeds + extra + held + seeds, [g for _, g in xs_grads])
        base = {f"in{i}": np.asarray(seen[x.ref()]) for i, x in enumerate(xs)}
        base_feeds = {t.ref(): v for t, v in zip(feeds, feed_values)}
        if at is not None:
            base = {k: np.asarray(at(v), v.dtype) for k, v in base.items()}

        def function(values):
            fed = dict(base_feeds)
            for i, x in enumerate(xs):
                fed[x.ref()] = values[f"in{i}"]
            result = forward(*[fed[t.ref()] for t in feeds + extra], *held_values)
            return {f"out{j}": tf.convert_to_tensor(r) for j, r in enumerate(result)}

        out_values = function({k: tf.constant(v) for k, v in base.items()})
        if at is not None:  # validated at the point (``spread_culprit``); here the domain
            if not all(np.all(np.isfinite(np.asarray(v))) for v in out_values.values()):
                return None
        elif not self._reproduces(ys, out_values, seen):
            return None  # the pruned op does not compute what the model did: no verdict
        # The local check runs in the op's coarsest dtype (a float32 op after an
        # autocast is judged by float32 steps and tolerances, never by float64's).
        precision = _coarsest([t.dtype.name for t in xs + ys])
        tol = _looser(tol, compare.tolerance(precision))
        # A handful of points per probe: eager calls of the pruned graph are
        # cheaper than tracing a vectorized batch for every op.
        fd = FiniteDifferences(function, base, list(out_values), eager=True, precision=precision)
        worst = None
        for _ in range(PROBES):
            v = {o: rng.standard_normal(np.shape(val)) for o, val in out_values.items()}
            u = {k: rng.standard_normal(np.shape(val)) for k, val in base.items()}
            fed = dict(base_feeds)
            for i, x in enumerate(xs):
                fed[x.ref()] = tf.constant(base[f"in{i}"])
            seed_values = [tf.cast(v[f"out{j}"], ys[j].dtype) for j in range(len(ys))]
            jtv = backward(*[fed[t.ref()] for t in feeds + extra], *held_values, *seed_values)
            for i, g in enumerate(jtv):
                if shape_rule and np.shape(g) != np.shape(base[f"in{i}"]):
                    return _WrongShape(self._op_input_index(op, xs[i]),
                                       _shape_text(np.shape(base[f"in{i}"])), _shape_text(np.shape(g)))
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
            if at is not None and not (np.isfinite(numeric) and np.isfinite(analytic)):
                return None  # the stencil left the function's domain: no verdict here
            pair = compare.compare_projections(
                "in", "out", np.array([analytic]), np.array([numeric]), np.array([numeric]),
                np.array([error]), np.array([scale]), tol,
            )
            if pair.failed and pair.verdict == "mismatch":
                rel = abs(analytic - numeric) / max(scale, np.finfo(float).tiny)
                if worst is None or rel > worst[2]:
                    worst = (analytic, numeric, rel)
        return worst


def _value_path(starts, ends, within=None) -> dict:
    """The floating tensors on a path from a tensor of ``starts`` to one of
    ``ends`` (``ref -> tensor``): reached from ``starts`` along floating tensors
    and read, along floating tensors, by an op that leads to ``ends``. A cut
    (``_cut_description``) is on a path but nothing flows on through it. With
    ``within``, only those ops count (the reverse pass's own)."""
    starts = [t for t in starts if _floating(t)]
    reached, stack = {}, list(starts)
    while stack:
        t = stack.pop()
        for consumer in t.consumers():
            if within is not None and consumer not in within:
                continue
            for out in consumer.outputs:
                if _floating(out) and out.ref() not in reached:
                    reached[out.ref()] = out
                    if not _cut_description(consumer):
                        stack.append(out)
    for t in starts:  # a start is on a path when it leads to an end
        reached.setdefault(t.ref(), t)
    needed, stack = {}, [t for t in ends if _floating(t)]
    while stack:
        t = stack.pop()
        if t.ref() in needed:
            continue
        needed[t.ref()] = t
        op = t.op
        if (within is not None and op not in within) or _cut_description(op):
            continue
        stack.extend(i for i in op.inputs if _floating(i))
    return {r: t for r, t in needed.items() if r in reached}


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
        return op.type == value or _override(op) is not None and _override(op)[0] == value
    user_grad = _closure(_custom_grad_fn(op) or (lambda: None)).get("grad_fn")
    return getattr(user_grad, "__code__", None) is value


class _WrongShape:
    """A local check's finding: the op's gradient for its input ``index`` has
    shape ``got``, not the input's ``expected`` (``autodiff``'s shape rule)."""

    def __init__(self, index, expected: str, got: str):
        self.index, self.expected, self.got = index, expected, got

    @classmethod
    def parse(cls, message: str, op):
        """From TensorFlow's graph-mode error "Incompatible shapes between op
        input and calculated input gradient" about ``op`` itself, else None."""
        found = re.search(
            r"Incompatible shapes between op input and calculated input gradient\. "
            r"Forward operation: (.+?)\. Input index: (\d+)\. Original input shape: (.+?)\. "
            r"Calculated input gradient shape: (.+)$", message.strip(),
        )
        if found is None or found.group(1) != op.name:
            return None
        index = int(found.group(2))
        n = _custom_result_count(op)
        return cls(index - (n or 0), found.group(3), found.group(4))


def _shape_text(shape) -> str:
    dims = ["None" if d is None else str(d) for d in (
        shape.as_list() if hasattr(shape, "as_list") else list(shape))]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _input_label(op, index) -> str:
    """``input 'scale'`` of an op: its argument name, or a custom gradient's position."""
    if _custom_result_count(op) is not None:
        names = _custom_argument_names(op)
        return f"argument '{names[index]}'" if index < len(names) else f"argument {index}"
    names = [a.name for a in op.op_def.input_arg] if op.op_def else []
    if len(names) == len(op.inputs) and 0 <= index < len(names):
        return f"input '{names[index]}'"
    return f"input {index}"


def _override(op):
    """``(registered name, "function at file:line")`` when ``op``'s gradient is
    not its type's: a ``gradient_override_map`` set ``_gradient_op_type`` (a
    ``tf.custom_gradient`` does too, and is reported as itself), else None."""
    from tensorflow.python.framework import ops as tf_ops

    if _custom_result_count(op) is not None:
        return None
    try:
        name = op.get_attr("_gradient_op_type")
    except (ValueError, TypeError):
        return None
    name = name.decode() if isinstance(name, bytes) else str(name)
    if not name or name == op.type:
        return None
    try:
        function = tf_ops.gradient_registry.lookup(name)
    except LookupError:
        return name, ""
    return name, _function_text(function)


def _function_text(function) -> str:
    """``qualname at file:line`` of a Python function, else its name."""
    code = getattr(function, "__code__", None)
    qual = getattr(function, "__qualname__", "") or getattr(function, "__name__", "")
    if code is None:
        return qual
    return f"{qual} at {relative_path(code.co_filename)}:{code.co_firstlineno}"


def _gradient_definition(op) -> str:
    """``file:line`` of the code that computes ``op``'s gradient when the user
    wrote it: a ``tf.custom_gradient``'s decorated function, or the Python
    function registered for a ``gradient_override_map``; else ""."""
    custom = _custom_definition(op)
    if custom:
        return custom
    override = _override(op)
    if override is None or " at " not in override[1]:
        return ""
    return override[1].rsplit(" at ", 1)[1]


def _layer_names(model) -> set:
    """Names of the Keras layers the model's module (and its ``model``) holds."""
    names = set()
    try:
        import keras
    except ImportError:
        return names
    roots = list(vars(model.module).values()) if getattr(model, "module", None) else []
    roots.append(getattr(model, "source", None))
    stack, seen = [r for r in roots if isinstance(r, keras.layers.Layer)], set()
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        names.add(layer.name)
        stack.extend(getattr(layer, "_layers", None) or [])
    return names


def _enclosing_class(path: str, line: int) -> str:
    """``Class.method`` when ``line`` is inside a method of a class (the
    innermost class and the method of it that encloses the line), else ""."""
    tree = _parsed(path)
    if tree is None:
        return ""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    item.lineno <= line <= (item.end_lineno or item.lineno)
                ):
                    if best is None or node.lineno > best[0]:
                        best = (node.lineno, f"{node.name}.{item.name}")
    return best[1] if best else ""


def _coarsest(dtypes) -> str:
    from gradcli.numerics.finite_diff import coarser

    lowest = "float64"
    for d in dtypes:
        lowest = coarser(lowest, d)
    return lowest


def _looser(a, b):
    """The tolerance that allows more in both terms (rule names both)."""
    if b.rtol <= a.rtol and b.atol <= a.atol:
        return a
    return type(a)(rtol=max(a.rtol, b.rtol), atol=max(a.atol, b.atol), rule=f"{a.rule}; {b.rule}")


def _ancestors(ops, control: bool = False) -> set:
    """``ops`` and every op they read from (and wait for, with ``control``)."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        if control:
            stack.extend(op.control_inputs)
    return seen


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


def _custom_argument_names(op) -> list[str]:
    """The parameter names of the function decorated with ``tf.custom_gradient``."""
    user_grad = _closure(_custom_grad_fn(op) or (lambda: None)).get("grad_fn")
    code = getattr(user_grad, "__code__", None)
    tree = _parsed(code.co_filename) if code is not None else None
    line = _enclosing_def(code.co_filename, code.co_firstlineno) if tree is not None else None
    for node in ast.walk(tree) if line else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


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
        parts = qual.split(".<locals>.")
        owner = parts[-2] if len(parts) > 1 else qual  # the function that defines grad
        return f"tf.custom_gradient {owner}".strip()
    return op.type


#: gradcli's own package folder: frames in it are the caller side of a model call.
_GRADCLI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _is_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        path.startswith(_LIBRARY_DIRS)
        or "site-packages" in path
        or filename.startswith("<")
        or path.startswith(sys.prefix)
    )
