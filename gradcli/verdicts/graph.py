"""The model's traced graph: its ops, the paths between them, and their lines.

``TracedGraph`` traces ``Model.function`` once into a graph
(``tf.compat.v1.wrap_function``, which keeps the graph prunable: any
intermediate tensor can be fed and any fetched). Every op records the Python
stack that created it, so each finding names the model-file line
(``location``: the innermost frame of the model file below gradcli's own call
of the model, else of user code; never a library's).

It holds what every rule on the graph shares: the trace (``trace``,
``callable``), reachability (``forward_ops``, ``path_ops``, ``reaches``), how a
report names an op (``site``, ``location``, ``describe_op``, ``keras_layer``),
and an op as a function of its own inputs (``local_inputs``,
``local_outputs``, ``checkable``, ``seen_values``), with the forward code of a
``tf.custom_gradient`` set apart (``inside_custom_gradients``: backpropagation
never calls the gradients of those ops). The rules themselves live beside it:
``sites`` (cuts, surrogates, boundaries), ``precision``, ``local_check``,
``spread``, ``gradient_faults``, ``culprit`` (whose ``ModelGraph`` gathers them).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

import numpy as np

from gradcli.errors import error_line
from gradcli.model.core import first_line, is_user_file, trace_specs
from gradcli.model.paths import relative_path
from gradcli.numerics.autodiff import functions_run_eagerly
from gradcli.numerics.held import tensor_of, tensors_of
from gradcli.results import GraphSite
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts.graph_ops import (
    SURROGATE_OPS, TRIVIAL_OPS, ancestors, custom_result_count, cut_description, describe,
    decorated_function, enclosing_class, floating, gradient_definition, override,
)

tf = import_tensorflow()

_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (os.__file__, np.__file__, tf.__file__, os.path.dirname(__file__))  # .../gradcli/
)
#: TensorFlow's package folder: the frames that make an op for whoever called TensorFlow.
_TF_DIR = os.path.dirname(os.path.abspath(tf.__file__)) + os.sep
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


def _holds_calls(graph) -> bool:
    """Whether a graph calls a function (a ``tf.function`` traced as a call)."""
    return any(op.type in ("PartitionedCall", "StatefulPartitionedCall") for op in graph.get_operations())


def holds_custom_gradient(graph, written_by_user: bool = False) -> bool:
    """Whether ``graph`` or a function of its library holds an ``IdentityN``
    with ``_gradient_op_type`` set (how ``tf.custom_gradient`` marks its
    results; a ``gradient_override_map`` of an ``IdentityN`` counts too);
    with ``written_by_user``, one whose gradient is defined in the user's
    files (``user_gradient``), not a library's (TensorFlow Probability's
    special functions hold several)."""
    found = custom_gradient_types(graph)
    return any(map(user_gradient, found)) if written_by_user else bool(found)


def custom_gradient_types(graph) -> set[str]:
    """The registered gradient names of the custom gradients ``graph`` and its
    function library hold (``holds_custom_gradient``), from one serialization."""
    definition = graph.as_graph_def()
    return {
        n.attr["_gradient_op_type"].s.decode()
        for nodes in [definition.node, *(f.node_def for f in definition.library.function)]
        for n in nodes if n.op == "IdentityN" and "_gradient_op_type" in n.attr
    }


def user_gradient(registered: str) -> bool:
    """Whether the gradient registered as ``registered`` (a custom gradient's
    or an override's) is defined outside the libraries: the function decorated
    with ``tf.custom_gradient``, or the registered function itself. Where it
    cannot be told, it counts as the user's (every check stays)."""
    from tensorflow.python.framework import ops as tf_ops

    try:
        function = tf_ops.gradient_registry.lookup(registered)
    except LookupError:
        return True
    code = getattr(decorated_function(function) or function, "__code__", None)
    return code is None or is_user_file(code.co_filename)


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


class TracedGraph:
    """A lazily traced graph of ``model.function`` at ``model.point``."""

    def __init__(self, model):
        self.model = model
        self.wrapped = None  # the ``wrap_function`` of the model's function, once traced
        self.error: str | None = None
        self.traced = False
        self._called = None  # the trace with tf.function calls kept, when the graph inlined them
        self.run_note: str | None = None  # why ``callable`` gave no graph to run
        #: an op's local check, cut out of this graph once (``local_check._cut_out``)
        self.cut_outs: dict = {}
        #: ops a culprit search found right, with the draws their checks took
        #: (``culprit._first_wrong``): a later pair's search of this graph
        #: replays the draws instead of checking them again
        self.cleared_ops: dict = {}

    #: whether the model's function calls ``tf.function``s (``trace``)
    calls_functions = False

    def trace(self) -> bool:
        """Trace the model once (later calls return the first answer): whether
        there is a graph. Sets ``graph``, ``inputs`` (name -> placeholder) and
        ``outputs`` (name -> tensor); ``error`` says why when there is none."""
        if self.wrapped is not None or self.error is not None:
            return self.wrapped is not None
        model = self.model
        names = list(model.point)
        specs = trace_specs(model.point)
        first = getattr(model, "first_trace", None)  # loading's trace, when it is of this function at these specs
        first = first[2] if first is not None and first[0] is model.function and first[1] == specs else None

        def traced(*args):
            return model.function(dict(zip(names, args)))

        # tf.function bodies are inlined (run_functions_eagerly), so their ops
        # (and a custom gradient inside one) are ops of this graph rather than
        # one opaque PartitionedCall; a body that needs autograph then fails,
        # and stays traced as a call. The switch is process-wide (another
        # thread's tf.functions would run eagerly meanwhile), so it is thrown
        # only for a graph that holds a call: without one, both traces are
        # the same graph, and a model whose trace holds one is not checked
        # beside another check (``analyses.check.model._beside_safely``).
        error = None
        for inline in (False, True):
            try:
                if first is not None and not inline:
                    wrapped = first
                else:
                    with functions_run_eagerly() if inline else contextlib.nullcontext():
                        wrapped = tf.compat.v1.wrap_function(traced, specs)
            except Exception as exc:  # not traceable in graph mode: no graph findings
                error = f"{type(exc).__name__}: {error_line(exc)}"
                continue
            if inline:
                self._called = self.wrapped
            self.wrapped = wrapped
            if inline or not _holds_calls(wrapped.graph):
                break
            self.calls_functions = True  # the model runs tf.functions (traced as calls)
        if self.wrapped is None:
            self.error = error
            return False
        self.graph = self.wrapped.graph
        self.inputs = dict(zip(names, self.wrapped.inputs))
        structured = self.wrapped.structured_outputs
        self.outputs = {o: structured[o] for o in model.outputs}
        self.traced = True
        return True

    def callable(self):
        """The traced graph as the model's function (dict of the point's
        tensors -> dict of outputs), or None when it cannot be traced: a call
        runs no Python of the model (``FiniteDifferences.traced``)."""
        if not self.trace():
            return None
        names = list(self.model.point)
        point = [tensor_of(self.model.point[n]) for n in names]
        # Inlining strips a tf.function's own settings: the body of a
        # ``jit_compile=True`` function (Keras' grouped convolution on CPU) may
        # not run outside XLA ("Fused conv implementation does not support
        # grouped convolutions"). So the graph runs once at the point first;
        # if it raises, the trace with the calls kept, else the model's Python.
        failure = None
        for wrapped in (self.wrapped, self._called):
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

    _custom_gradients: bool | None = None

    @property
    def custom_gradients(self) -> bool:
        """Whether the trace holds a ``tf.custom_gradient`` (an ``IdentityN``
        whose gradient is overridden), at its top or in a function body it
        runs (a loop's, a branch's, a ``tf.function``'s): where forward mode
        can differ between an eager accumulator and one inside a traced
        function (``numerics.autodiff``'s docstring). False without a trace."""
        if self._custom_gradients is None:
            self._gradient_types = custom_gradient_types(self.graph) if self.trace() else set()
            self._custom_gradients = bool(self._gradient_types)
        return self._custom_gradients

    _user_custom_gradients: bool | None = None

    @property
    def user_custom_gradients(self) -> bool:
        """``custom_gradients`` written in the user's files (``user_gradient``):
        where the check takes forward mode both ways; a library's (TensorFlow
        Probability's ``bessel_ive``) is the library's own code, as for the
        spread rule (``verdicts.spread``)."""
        if self._user_custom_gradients is None:
            # The names read when ``custom_gradients`` was first asked: the
            # graph rules add gradient ops to the trace since, not custom gradients.
            self._user_custom_gradients = self.custom_gradients and any(map(user_gradient, self._gradient_types))
        return self._user_custom_gradients

    # -- reachability ---------------------------------------------------------

    def forward_ops(self, name, stop_at_cuts=False) -> set:
        """The ops reached from input ``name`` (not through a cut, with ``stop_at_cuts``)."""
        start = self.inputs[name].op
        seen, stack = set(), [start]
        while stack:
            op = stack.pop()
            for t in op.outputs:
                for consumer in t.consumers():
                    if consumer not in seen:
                        seen.add(consumer)
                        if not (stop_at_cuts and cut_description(consumer)):
                            stack.append(consumer)
        return seen

    def backward_ops(self, output) -> set:
        """The ops ``output`` reads from or waits for."""
        return ancestors([self.outputs[output].op], control=True)

    def path_ops(self, name, output) -> list:
        """Ops on a path from input ``name`` to ``output``, in graph (topological) order."""
        between = self.ops_between(name, [self.outputs[output]])
        return [op for op in self.graph.get_operations() if op in between]

    def ops_between(self, name, ends) -> set:
        """Ops on a path from input ``name`` to any of the tensors ``ends`` (an
        output, or a gradient built in this graph: ``verdicts.symmetric``)."""
        return self.forward_ops(name) & ancestors([t.op for t in ends], control=True)

    def reaches(self, name, output) -> bool:
        return self.trace() and bool(self.path_ops(name, output))

    def differentiated_ops(self) -> set:
        """Ops a gradient flows through: reached from a differentiated input along
        floating tensors (not through a cut) and reaching an output."""
        if not self.trace():
            return set()
        reached, stack = set(), [self.inputs[n].op for n in self.model.wrt if n in self.inputs]
        while stack:
            op = stack.pop()
            for t in op.outputs:
                if not floating(t):
                    continue
                for consumer in t.consumers():
                    if consumer not in reached:
                        reached.add(consumer)
                        if not cut_description(consumer):
                            stack.append(consumer)
        used = set().union(*(self.backward_ops(o) for o in self.outputs))
        return reached & used

    # -- naming an op in a report -------------------------------------------------

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
            return gradient_definition(op) if custom_result_count(op) is not None else ""
        frame = user[-1]
        return f"{relative_path(frame.filename)}:{frame.lineno}"

    def made_at(self, op) -> str:
        """``file:line`` of the user's line that made ``op`` itself, calling
        TensorFlow directly: the innermost frame outside TensorFlow, when it is
        user code; "" when another library made the op on the user's behalf
        (a bijector framework's sum over event dimensions, a Keras layer's
        op), where ``location`` names the user's call of that library."""
        frames = [f for f in op.traceback if not os.path.abspath(f.filename).startswith(_TF_DIR)]
        if not frames or _is_library(frames[-1].filename):
            return ""
        return f"{relative_path(frames[-1].filename)}:{frames[-1].lineno}"

    def describe_op(self, op) -> str:
        """What to call ``op`` in a report: the op type (or ``tf.custom_gradient
        NAME``), whether a ``gradient_override_map`` replaced its registered
        gradient and by which function, and the Keras layer whose ``call`` made
        it (``keras_layer``)."""
        text = describe(op)
        overridden = override(op)
        if overridden is not None:
            name, function = overridden
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
            (c for c in (enclosing_class(f.filename, f.lineno) for f in reversed(frames)
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

    # -- an op as a function of its own inputs ------------------------------------

    def inside_custom_gradients(self, path) -> set:
        """Ops of the forward code of a ``tf.custom_gradient`` (between its
        arguments and its results): backpropagation never calls their gradients,
        the decorated function's gradient replaces them, so they cannot be the
        culprit (a correct ``x * x`` there must not be blamed)."""
        inside = set()
        for op in path:
            n = custom_result_count(op)
            if n is None:
                continue
            results = {t.op for t in op.inputs[:n]}
            args = list(op.inputs[n:])
            below = ancestors(results)
            arg_ops = {t.op for t in args}
            for o in below:
                if o not in arg_ops and self.depends_on(o, arg_ops):
                    inside.add(o)
        return inside

    @staticmethod
    def depends_on(op, targets) -> bool:
        """Whether ``op`` is one of ``targets`` or reads from one."""
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

    def checkable(self, op) -> bool:
        """Whether ``op``'s own gradient can be checked: a floating function of
        floating inputs that is not plumbing, a surrogate or a cut."""
        if op.type in TRIVIAL_OPS or op.type in SURROGATE_OPS or cut_description(op):
            return False
        if not any(floating(t) for t in self.local_outputs(op)):
            return False
        return any(floating(t) for t in self.local_inputs(op))

    def local_inputs(self, op):
        """The op's distinct floating inputs: an input fed twice (``x * x``) is one
        variable of the local function, perturbed once."""
        n = custom_result_count(op)
        inputs = list(op.inputs)
        if n is not None:  # custom gradient: the decorated function's arguments
            inputs = inputs[n:]
        distinct = {}
        for t in inputs:
            if floating(t):
                distinct.setdefault(t.ref(), t)
        return list(distinct.values())

    def local_outputs(self, op):
        """The op's floating outputs (a custom gradient's results)."""
        n = custom_result_count(op)
        outputs = list(op.outputs)
        if n is not None:
            outputs = outputs[:n]
        return [t for t in outputs if floating(t)]

    def prune(self, feeds, fetches):
        """The piece of the traced graph from ``feeds`` to ``fetches``
        (``WrappedFunction.prune``), as a callable of the feeds' values in order.

        Called by its flat signature, the one a pruned function has: a plain
        call of it first tries a structured signature it lacks, and the failure
        TensorFlow raises and then discards formats every argument's value into
        its message (numpy's array printing was 14 of 33 s of a layer pass's
        culprit search on a 12-unit network). Same call, same result."""
        function = self.wrapped.prune(feeds, fetches)
        flat = getattr(function, "_call_with_flat_signature", None)
        if flat is None:  # another TensorFlow: the plain call, slower
            return function
        return lambda *values: flat(values, {})

    def fingerprint(self, cuts, fetches, values) -> str | None:
        """A digest of what the piece of the traced graph from ``cuts`` to
        ``fetches`` computes when its cuts are fed ``values`` (arrays, in
        order): its ops (their definitions, less ``TRACE_NAMES``), the values
        of the tensors it captures, and ``values``. None when the piece could
        compute anything else under the same digest: a stateful op (a random
        draw, a ``numpy_function``, a variable read), a captured resource (a
        variable, whose value is not in the graph), or an op that runs a
        function (a loop's body, a call: its definition is elsewhere). Two
        equal digests are the same computation on the same numbers; two
        traces of one function may differ in names, which only costs a miss."""
        import hashlib

        cut = {c.ref() for c in cuts}
        captured = {inside.ref(): outside for outside, inside in self.graph.captures}
        ops, seen, stack = [], set(), [f.op for f in fetches]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            ops.append(op)
            stack.extend(x.op for x in op.inputs if x.ref() not in cut)
            stack.extend(op.control_inputs)
        digest = hashlib.sha256(repr(([c.name for c in cuts], [f.name for f in fetches])).encode())
        values = list(values)
        for op in sorted(ops, key=lambda o: o.name):
            if op._is_stateful:
                return None
            node = op.node_def
            for name in TRACE_NAMES:
                if name in node.attr:
                    del node.attr[name]
            if any(v.HasField("func") or len(v.list.func) for v in node.attr.values()):
                return None
            digest.update(node.SerializeToString(deterministic=True))
            for output in op.outputs:
                if output.ref() in captured:
                    outside = captured[output.ref()]
                    if outside.dtype in (tf.resource, tf.variant):
                        return None
                    values.append(np.asarray(outside))
        for value in values:
            value = np.asarray(value)
            digest.update(f"{value.dtype.str}{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        return digest.hexdigest()

    def point_feeds(self):
        """The model's inputs in the trace (``feeds``) and their values at the point, as tensors."""
        return [self.inputs[n] for n in self.model.point], list(tensors_of(self.model.point).values())

    def seen_values(self, ops, fed_values=None):
        """The model's inputs (``feeds``), their values, and ``seen``: tensor ref ->
        the value each local input and output of ``ops`` had at the point.
        ``fed_values``: ``point_feeds()``, where the caller has them."""
        feeds, feed_values = fed_values or self.point_feeds()
        fed = {t.ref() for t in feeds}
        needed = {}
        for op in ops:
            for t in self.local_inputs(op) + self.local_outputs(op):
                if t.ref() not in fed:
                    needed.setdefault(t.ref(), t)
        needed = list(needed.values())
        values = self.prune(feeds, needed)(*feed_values) if needed else []
        seen = {t.ref(): v for t, v in zip(needed, values)}
        seen.update({t.ref(): v for t, v in zip(feeds, feed_values)})
        return feeds, feed_values, seen


#: Node attributes that name a trace rather than compute: a custom gradient's
#: forward op carries a fresh gradient name per trace, which only gradients
#: built from it read (and those are ops of the piece digested).
TRACE_NAMES = ("_gradient_op_type",)
