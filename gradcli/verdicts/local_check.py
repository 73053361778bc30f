"""The local check of one op's own gradient, and the culprit record it convicts.

``check_op``: the function from an op's floating inputs to its floating
outputs is evaluated by feeding the values it saw at the point; its registered
(or custom) gradient gives <u, J^T v> for random u, v (seeded, ``PROBES``
pairs), and central differences with Richardson (``FiniteDifferences.along``)
give <v, J u>. The verdict rule is ``compare.compare_projections`` with the
check's tolerance (or the op's dtype's, if looser); only a resolved
``mismatch`` (not ``inconclusive``) convicts.

A probe is taken in each input element's own units: element i moves along u_i
max(1, |x_i|) (u standard normal), the size by which the element-wise step
rule scales its step, and the comparison's scale is ||J||_F in those units,
estimated from the probes as the fast check's (``_probed``). Why: along plain
u, a direction's step follows its input's largest element
(``FiniteDifferences.direction_steps``), and an input holding a masking
constant (the -1e9 Keras adds to an attention's masked logits) stepped every
element by about 6e3; the softmax saturated at both points, its differences
read 0 where its right gradient reads 2, and TensorFlow's own softmax was
named the culprit of a wrong GELU behind it. In these units the masked logits
move by about 6e3 (still -1e9 to ``exp``) and the others by the step their own
size calls for. For inputs within [-1, 1] the probe is the plain one. A
``tf.custom_gradient`` op is checked as the whole decorated function (its
arguments to its results).

Each local check is validated before it may blame: its inputs are distinct
tensors (``x * x`` is one variable), its gradient is the op's partial
derivative (``stop_gradients``), the op's other inputs (a select's condition,
an index) are held at their values, the pruned op reproduces the outputs the
model computed (``reproduces``), and it runs with the steps and tolerance of
the coarsest precision of the op's function (its dtypes and every tensor
between its inputs and outputs, ``precision.path_precision``). A gradient of
the wrong shape convicts without a probe (``WrongShape``).

``culprit_record`` turns a conviction into the ``Culprit`` a report shows: what
the op is, where its gradient is defined, the user's gradients inside a loop
or call (``rules_in_body``), and the probe that convicted it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from gradcli.numerics.autodiff import graph_gradients
from gradcli.results import Culprit
from gradcli.tf_import import import_tensorflow
from gradcli.verdicts import compare
from gradcli.verdicts.graph_ops import (
    custom_argument_names, custom_result_count, describe, floating, gradient_definition, override,
)
from gradcli.verdicts.precision import path_precision
from gradcli.verdicts.symmetric import SYMMETRIC_INPUT_OPS, is_symmetric, symmetric_direction

tf = import_tensorflow()

#: Probes (random u, v pairs) per op check.
PROBES = 2


class _Unresolved:
    """``check_op``'s answer when no probe convicts and some probe could not be
    resolved (``inconclusive``): the op's gradient is neither wrong nor shown
    right, so the op cannot vouch for the ops before it (``find_culprit``'s
    scan to the output)."""

    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()


class WrongShape:
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
        n = custom_result_count(op)
        return cls(index - (n or 0), found.group(3), found.group(4))


def _shape_text(shape) -> str:
    dims = ["None" if d is None else str(d) for d in (
        shape.as_list() if hasattr(shape, "as_list") else list(shape))]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _input_label(op, index) -> str:
    """``input 'scale'`` of an op: its argument name, or a custom gradient's position."""
    if custom_result_count(op) is not None:
        names = custom_argument_names(op)
        return f"argument '{names[index]}'" if index < len(names) else f"argument {index}"
    names = [a.name for a in op.op_def.input_arg] if op.op_def else []
    if len(names) == len(op.inputs) and 0 <= index < len(names):
        return f"input '{names[index]}'"
    return f"input {index}"


def _op_input_index(op, x) -> int:
    """Position of ``x`` among the op's inputs (a custom gradient's arguments)."""
    inputs = list(op.inputs)[custom_result_count(op) or 0:]
    return next((i for i, t in enumerate(inputs) if t.ref() == x.ref()), 0)


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
    return type(a)(rtol=max(a.rtol, b.rtol), atol=max(a.atol, b.atol), rule=f"{a.rule}; {b.rule}",
                   dtype=(b if b.rtol >= a.rtol else a).dtype)


def reproduces(ys, out_values, seen) -> bool:
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


def first_gradients(graph, xs, ys, rng) -> list:
    """The op's gradient J^T w for a fixed standard normal cotangent w (seeded):
    tensors of the graph that depend on the op's inputs ``xs`` through the
    op's gradient function (a custom gradient's closure included)."""
    with graph.graph.as_default():
        w = [tf.constant(rng.standard_normal(y.shape.as_list()), y.dtype) for y in ys]
        grads = graph_gradients(ys, xs, grad_ys=w, stop_gradients=xs)
    return [g for g in grads if g is not None and floating(g)]


# -- the check -------------------------------------------------------------------


def check_op(graph, op, feeds, feed_values, seen, tol, rng, to=None, order=1, at=None, only=None):
    """The op's gradient against differences of the op alone, or with ``to``
    (a model output) of the function from the op's inputs to ``to``; with
    ``order=2`` the function is the op's gradient (``first_gradients``).
    ``at``: a function of the op's input values (as it saw them) giving the
    input values to check it at instead (the spread, ``spread.spread_culprit``);
    a point where the op's values or differences are not finite is outside
    its domain and gives no verdict. ``only``: the op's inputs to check
    (the others held at their values), all when None.

    ``(analytic, numeric, relative error)`` of the worst probe that convicts,
    a ``WrongShape``, ``UNRESOLVED`` (no probe convicts, and some probe is
    inconclusive), or None (no verdict, or the gradient agrees)."""
    xs, ys = graph.local_inputs(op), ([to] if to is not None else graph.local_outputs(op))
    if only is not None:
        xs = [x for x in xs if x.ref() in only]
    shape_rule = to is None and order == 1  # an op's own first-order gradient
    if order == 2:
        ys = first_gradients(graph, xs, ys, rng)
        if not ys:
            return None
    local = _cut_out(graph, op, feeds, feed_values, xs, ys, order, shape_rule, to)
    if local is None or isinstance(local, WrongShape):
        return local
    local = local.at_values(seen, at)
    out_values = local({k: tf.constant(v) for k, v in local.base.items()})
    if at is not None:  # validated at the point (``spread_culprit``); here the domain
        if not all(np.all(np.isfinite(np.asarray(v))) for v in out_values.values()):
            return None
    elif not reproduces(ys, out_values, seen):
        return None  # the pruned op does not compute what the model did: no verdict
    # The local check runs in the coarsest precision its function rounds to:
    # its inputs' and outputs' dtypes (a float32 op after an autocast is judged
    # by float32 steps and tolerances, never by float64's) and every carrying
    # tensor between them (a custom gradient whose code runs an FFT in
    # complex64, an op's function to the output through a float32 cast, a
    # loop body that casts: ``precision.path_precision``).
    precision = _coarsest([t.dtype.name for t in local.xs + ys]
                          + [path_precision(local.xs, ys, graph.graph)])
    tol = _looser(tol, compare.tolerance(precision))
    return _probe(local, op, out_values, precision, tol, rng, shape_rule, at, _read_as_symmetric(local, op, to))


def check_fingerprint(graph, op, feeds, feed_values, seen, tol, only=None) -> tuple | None:
    """What ``check_op(graph, op, feeds, feed_values, seen, tol, ..., only=only)``
    computes, as a key: the digest (``ModelGraph.fingerprint``) of the piece
    of the graph its cut-out runs (the op, its gradient as built now, the
    values it holds) fed the model's inputs and the op's inputs as it saw
    them, with the tolerance and the inputs checked; None where no digest
    stands for the computation (a stateful op, a captured variable, a
    function call, nothing to cut out). Equal keys give the same result, at
    the point and at any ``at`` of its values (the spread, ``spread``).
    Nothing is pruned: a key found needs no cut-out.

    ``seen`` None: the piece is cut at the model's inputs alone, so it holds
    every op from them to the op as well, and the key needs no value the
    model computed (what the op saw follows from the inputs' values through
    ops that hold no state): a warm check's key without running the graph."""
    xs, ys = graph.local_inputs(op), graph.local_outputs(op)
    if only is not None:
        xs = [x for x in xs if x.ref() in only]
    built = _gradients(graph, op, xs, ys, 1, True)
    if built is None or isinstance(built, WrongShape):
        return None
    seeds, xs_grads = built
    xs = [x for x, _ in xs_grads]
    fed = {t.ref() for t in feeds}
    cut = [] if seen is None else [x for x in xs if x.ref() not in fed]
    fetches = ys + [g for _, g in xs_grads] + _held(graph, op, feeds, xs, None)
    digest = graph.fingerprint(feeds + cut + seeds, fetches, [*feed_values, *(seen[x.ref()] for x in cut)])
    kind = "cut at the op" if seen is not None else "cut at the inputs"
    return None if digest is None else (kind, digest, repr(tol), tuple(x.name for x in xs))


def _cut_out(graph, op, feeds, feed_values, xs, ys, order, shape_rule, to):
    """The op's gradient graph and pruned functions (``_partial_gradients``,
    ``_LocalFunction.pruned``), or what stops them (None, a ``WrongShape``).
    Built once per op, inputs and feeds of a graph (``TracedGraph.cut_outs``):
    the spread rule checks the same op at seven points and two looks each,
    and every build adds a gradient to the graph and prunes two functions
    (the bulk of a local check's cost). Second order is built each time: its
    outputs are the gradients ``first_gradients`` adds with a draw of ``rng``."""
    key = (op.name, tuple(x.name for x in xs), tuple(y.name for y in ys), tuple(t.name for t in feeds),
           None if to is None else to.name, shape_rule)
    if order == 1 and key in graph.cut_outs:
        return graph.cut_outs[key]
    built = _gradients(graph, op, xs, ys, order, shape_rule)
    if built is not None and not isinstance(built, WrongShape):
        seeds, xs_grads = built
        built = _LocalFunction.pruned(graph, op, feeds, feed_values, xs_grads, ys, seeds, to)
    if order == 1:
        graph.cut_outs[key] = built
    return built


def _gradients(graph, op, xs, ys, order, shape_rule):
    """``_partial_gradients``, first order built once per op, inputs and
    outputs of a graph (``TracedGraph.cut_outs``): its cut-outs for several
    feeds, and ``check_fingerprint``, read the same gradient."""
    key = ("gradients", op.name, tuple(x.name for x in xs), tuple(y.name for y in ys), shape_rule)
    if order == 1 and key in graph.cut_outs:
        return graph.cut_outs[key]
    built = _partial_gradients(graph, op, xs, ys, order, shape_rule)
    if order == 1:
        graph.cut_outs[key] = built
    return built


def _held(graph, op, feeds, xs, to) -> list:
    """The op's inputs its own derivative holds at the values they had (a
    select's condition, an index: not floating, computed from ``xs``):
    recomputed from a moved input, a condition ``x != 0`` would flip at a
    padded zero, and the op's local function would jump where its derivative
    is what its rule says. None for a function to an output (``to``)."""
    fed = {t.ref() for t in feeds}
    return [
        t for t in op.inputs
        if to is None and not floating(t) and t.dtype not in (tf.resource, tf.variant)
        and t.ref() not in fed and graph.depends_on(t.op, {x.op for x in xs})
    ]


def _partial_gradients(graph, op, xs, ys, order, shape_rule):
    """``(seeds, [(x, gradient)])``: the op's gradient of ``ys`` for cotangent
    placeholders ``seeds``, for each of ``xs`` that has one; None when none
    has; a ``WrongShape`` when the shape rule convicts it already."""
    with graph.graph.as_default():
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
            wrong = WrongShape.parse(str(exc), op) if shape_rule else None
            if wrong is None:
                raise
            return wrong
    if shape_rule:  # shapes known only when run are checked when run (``_probe``)
        for x, g in zip(xs, grads):
            if g is not None and not g.shape.is_compatible_with(x.shape):
                return WrongShape(_op_input_index(op, x), _shape_text(x.shape), _shape_text(g.shape))
    xs_grads = [(x, g) for x, g in zip(xs, grads) if g is not None]
    if not xs_grads:
        return None
    return seeds, xs_grads


@dataclass(eq=False)
class _LocalFunction:
    """The op cut out of the model's graph: ``forward`` maps the op's inputs
    ``xs`` (named ``in0``, ``in1``, ...) to ``ys`` (``out0``, ...), ``backward``
    its gradient for a cotangent; ``base`` is where it is checked."""

    xs: list
    feeds: list
    extra: list
    held_values: list
    forward: object
    backward: object
    base: dict | None  # None until ``at_values``
    base_feeds: dict
    ys: list

    @classmethod
    def pruned(cls, graph, op, feeds, feed_values, xs_grads, ys, seeds, to):
        xs = [x for x, _ in xs_grads]
        fed_refs = {t.ref() for t in feeds}
        extra = [x for x in xs if x.ref() not in fed_refs]
        held = _held(graph, op, feeds, xs, to)
        held_values = list(graph.prune(feeds, held)(*feed_values)) if held else []
        forward = graph.prune(feeds + extra + held, ys)
        backward = graph.prune(feeds + extra + held + seeds, [g for _, g in xs_grads])
        base_feeds = {t.ref(): v for t, v in zip(feeds, feed_values)}
        return cls(xs, feeds, extra, held_values, forward, backward, None, base_feeds, ys)

    def at_values(self, seen, at=None) -> "_LocalFunction":
        """This function checked at the values its inputs had in the model
        (``seen``), or at ``at`` of them (the spread)."""
        base = {f"in{i}": np.asarray(seen[x.ref()]) for i, x in enumerate(self.xs)}
        if at is not None:
            base = {k: np.asarray(at(v), v.dtype) for k, v in base.items()}
        return dataclasses.replace(self, base=base)

    def __call__(self, values):
        """The op's outputs for input values ``{"in0": ..., ...}``."""
        fed = dict(self.base_feeds)
        for i, x in enumerate(self.xs):
            fed[x.ref()] = values[f"in{i}"]
        result = self.forward(*[fed[t.ref()] for t in self.feeds + self.extra], *self.held_values)
        return {f"out{j}": tf.convert_to_tensor(r) for j, r in enumerate(result)}

    def gradient(self, v) -> list:
        """J^T v at ``base`` for output cotangents ``{"out0": ..., ...}``."""
        fed = dict(self.base_feeds)
        for i, x in enumerate(self.xs):
            fed[x.ref()] = tf.constant(self.base[f"in{i}"])
        seed_values = [tf.cast(v[f"out{j}"], self.ys[j].dtype) for j in range(len(self.ys))]
        return self.backward(*[fed[t.ref()] for t in self.feeds + self.extra], *self.held_values,
                             *seed_values)


def _read_as_symmetric(local, op, to) -> set:
    """The local inputs (``in0``, ...) probed along symmetric directions only
    (``symmetric``): symmetric at the point, and read by an op of
    ``SYMMETRIC_INPUT_OPS``, the op itself, or (checked to the output, ``to``)
    one that reads the same tensor: a Cholesky beside a ``MatrixInverse`` of
    one covariance S, whose function from S to the output holds the
    Cholesky's convention too (probed along any direction, the inverse was
    named the culprit of a correct Gaussian log-density)."""
    def read(x):
        return op.type in SYMMETRIC_INPUT_OPS or (to is not None and any(
            c.type in SYMMETRIC_INPUT_OPS for c in x.consumers()))
    return {f"in{i}" for i, x in enumerate(local.xs) if read(x) and is_symmetric(local.base[f"in{i}"])}


def _probe(*args, **kwargs):
    """``_probed``, with numpy's floating-point warnings off: an input that
    holds float32's most negative value (the mask Keras adds to an attention's
    logits), moved in its own units, overflows, and its differences are not
    finite. The rule says what that means (no verdict at a spread point,
    ``UNRESOLVED`` at the point); numpy's warnings reached the user's stderr
    from a culprit search inside BERT-base."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _probed(*args, **kwargs)


def _probed(local, op, out_values, precision, tol, rng, shape_rule, at, symmetric_inputs=frozenset()):
    """The worst of ``PROBES`` random probes that convicts (``compare_projections``
    says ``mismatch``): ``(analytic, numeric, error relative to its scale,
    the larger of ||J||_F and the projection)``; a ``WrongShape`` for a
    gradient whose shape shows only when run;
    ``UNRESOLVED`` when none convicts and some probe is inconclusive; None
    when every probe agrees or the stencil left the function's domain."""
    from gradcli.numerics.finite_diff import FiniteDifferences

    base = local.base
    unresolved = False
    # A handful of points per probe: eager calls of the pruned graph are
    # cheaper than tracing a vectorized batch for every op.
    fd = FiniteDifferences(local, base, list(out_values), eager=True, precision=precision)
    sizes = {k: np.maximum(1.0, np.abs(np.asarray(val, np.float64))) for k, val in base.items()}
    probes = []  # per probe: <u, J^T v>, <v, J u> by differences, its error, |u|^2, |v|^2, |J u|^2, |J^T v|^2
    for _ in range(PROBES):
        v = {o: rng.standard_normal(np.shape(val)) for o, val in out_values.items()}
        u = {k: rng.standard_normal(np.shape(val)) for k, val in base.items()}
        # a symmetric matrix a Cholesky reads: its contract, defined along symmetric directions only
        u = {k: symmetric_direction(d) if k in symmetric_inputs else d for k, d in u.items()}
        jtv = local.gradient(v)
        for i, g in enumerate(jtv):
            if shape_rule and np.shape(g) != np.shape(base[f"in{i}"]):
                return WrongShape(_op_input_index(op, local.xs[i]),
                                  _shape_text(np.shape(base[f"in{i}"])), _shape_text(np.shape(g)))
        # In each element's own units (the module docstring): the direction
        # u * size, the gradient's terms g * size.
        jtv = [np.asarray(g) * sizes[f"in{i}"] for i, g in enumerate(jtv)]
        analytic = sum(float(np.sum(g * u[f"in{i}"])) for i, g in enumerate(jtv))
        numeric, error, ju_squares = 0.0, 0.0, 0.0
        for k in base:
            d = fd.along(k, (u[k] * sizes[k])[None])
            for o in out_values:
                ju = d.values[o][0]
                numeric += float(np.sum(v[o] * ju))
                error += float(np.sum(np.abs(v[o]) * d.errors[o][0]))
                ju_squares += float(np.sum(ju**2))
        if at is not None and not (np.isfinite(numeric) and np.isfinite(analytic)):
            return None  # the stencil left the function's domain: no verdict here
        probes.append((
            analytic, numeric, error,
            sum(float(np.sum(x**2)) for x in u.values()), sum(float(np.sum(x**2)) for x in v.values()),
            ju_squares, sum(float(np.sum(np.asarray(g) ** 2)) for g in jtv),
        ))
    analytic, numeric, error, u_squares, v_squares, ju_squares, jtv_squares = (
        np.array(column) for column in zip(*probes))
    # The fast check's rule (``compare.projection_scale``): rtol applies to
    # ||J||_F, the typical size of a projection, not to the Cauchy-Schwarz
    # bound |u| |J^T v|, which is sqrt(size) times larger for an op of many
    # elements: a wrong GELU of 98,304 elements in float32 (its derivative 0.9
    # times the right one) was 3e-4 of that bound, passed as right within
    # rtol 1e-3, and an op of the layer norm before it was named the culprit.
    frobenius, roundoff = compare.projection_scale(u_squares, v_squares, ju_squares, jtv_squares, precision)
    # ... and to the probe's own projection where that is larger: a gradient
    # whose every element is within rtol of the right one, all to one side
    # (a gradient scaled by 1 + rtol), moves a projection by rtol times
    # itself, which passes full mode's element rule. The fast check re-checks
    # such a pair element by element; a local check has no re-check, and
    # against ||J||_F alone it convicted a softplus 1% off at inputs of
    # magnitude 10 under rtol 1e-2 (the spread rule, sample_models'
    # buggy_custom_gradient.py).
    scale = np.maximum(frobenius, np.abs(numeric))
    norms = np.sqrt(u_squares) * np.sqrt(v_squares)
    worst = None
    for p in range(len(probes)):
        one = slice(p, p + 1)
        pair = compare.compare_projections(
            "in", "out", analytic[one], numeric[one], numeric[one], error[one], scale[one], tol,
            roundoff[one], norms[one],
        )
        if pair.failed and pair.verdict == "mismatch":
            rel = abs(analytic[p] - numeric[p]) / max(scale[p], np.finfo(float).tiny)
            if worst is None or rel > worst[2]:
                worst = (float(analytic[p]), float(numeric[p]), rel)
        elif pair.failed:
            unresolved = True
    if worst is None and unresolved:
        return UNRESOLVED
    return worst


# -- the culprit record ------------------------------------------------------------


def rules_in_body(graph, op) -> list:
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
            g = graph.graph
            function = g._get_function(name) if hasattr(g, "_get_function") else None
            body = getattr(function, "graph", None)
            if body is None:
                continue
            for inner in body.get_operations():
                if custom_result_count(inner) is not None or override(inner) is not None:
                    found.append(inner)
                stack.append(inner)
    return found


def culprit_record(graph, op, found, count, what) -> Culprit:
    """The culprit record of ``op``: what it is (``describe_op``), where its
    gradient is defined, and the probe that convicted it (NaN for a
    gradient of the wrong shape, which no probe can be formed from)."""
    description = graph.describe_op(op)
    rules = rules_in_body(graph, op)
    if rules:  # a loop or call whose own gradient is wrong: the user's rules inside it
        description += ", whose body holds " + ", ".join(dict.fromkeys(  # once each
            f"{describe(r)} at {graph.location(r) or r.name}"
            + (f" (defined at {gradient_definition(r)})" if gradient_definition(r) else "")
            for r in rules
        ))
    if isinstance(found, WrongShape):
        arg = _input_label(op, found.index)
        return Culprit(
            site=graph.site(op, f"{description} returns a gradient of shape {found.got} "
                                f"for {arg} of shape {found.expected}"),
            definition=gradient_definition(op), analytic=float("nan"),
            numeric=float("nan"), rel_error=float("inf"), checked_ops=count,
            checked="gradient's shape",
        )
    # The probe was chosen by its error relative to the probe's scale
    # (``check_op``); the report gives it relative to the two values shown,
    # as an element's (``compare``), so a reader can recompute it.
    analytic, numeric, _ = found
    rel = abs(analytic - numeric) / max(abs(analytic), abs(numeric), np.finfo(float).tiny)
    return Culprit(
        site=graph.site(op, description), definition=gradient_definition(op),
        analytic=analytic, numeric=numeric, rel_error=rel, checked_ops=count, checked=what,
    )
