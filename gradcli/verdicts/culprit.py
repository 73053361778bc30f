"""The culprit (the op whose own gradient is wrong), and ``ModelGraph``: every graph rule in one place.

``find_culprit`` checks each differentiable op on the path from an input to an
output, in graph order, on its own (``local_check.check_op``: the op's
registered or custom gradient against central differences of the op alone, at
the values it saw at the point); the first op with a ``mismatch`` is the
culprit. When no op is wrong alone (an op whose own outputs are not well
defined, such as the singular vectors of Svd at repeated singular values,
cannot be differenced alone), each op's function to the output is checked,
from the output backwards. A ``tf.custom_gradient`` op is checked as the whole
decorated function (its arguments to its results) and the report names the
line of the decorated function's ``def``; the ops of its forward code are
never checked (backpropagation does not use their gradients), except inside a
library's wrapper (``tf.recompute_grad``), which only passes its gradient
through to the code it wraps. With ``order=2`` the function checked is each
op's gradient for a fixed random cotangent, and a rule the user wrote that
the gradient calls is named before the op that calls it. ``forward_culprit``
names where forward mode parts from reverse mode.

``ModelGraph`` is the traced graph (``graph.TracedGraph``: tracing, reachability,
op locations and descriptions) with the rules built on it as methods, each a
short delegate to its module: ``sites`` (cut, surrogate and none-gradient
sites, branch boundaries), ``precision`` (the precision rule), ``spread`` (the
spread rule over user-written gradients), ``gradient_faults`` (a gradient that
raises, is nondeterministic, or has no forward mode) and the culprit search
here. The op kinds (``CUT_OPS``, ``SURROGATE_OPS``, ``TRIVIAL_OPS``) are
``graph_ops``'s; they and ``SPREAD_POINTS``, ``FIXED_BOUNDARIES`` and ``PROBES``
are named here too, where callers have always found them.
"""

from __future__ import annotations

import os

import numpy as np

from gradcli.model.core import is_user_file
from gradcli.results import Culprit, GraphSite
from gradcli.verdicts import gradient_faults, sites, spread
from gradcli.verdicts import precision as precision_rule
from gradcli.verdicts.graph import TracedGraph
from gradcli.verdicts.graph_ops import (
    CUT_OPS, SURROGATE_OPS, TRIVIAL_OPS, custom_result_count, describe, gradient_definition, override,
)
from gradcli.verdicts.local_check import (
    PROBES, UNRESOLVED, check_op, culprit_record, first_gradients, rules_in_body,
)
from gradcli.verdicts.sites import FIXED_BOUNDARIES
from gradcli.verdicts.spread import SPREAD_POINTS

__all__ = [
    "CUT_OPS", "FIXED_BOUNDARIES", "PROBES", "SPREAD_POINTS", "SURROGATE_OPS", "TRIVIAL_OPS",
    "ModelGraph", "find_culprit", "forward_culprit",
]


class ModelGraph(TracedGraph):
    """A lazily traced graph of ``model.function`` at ``model.point``, with
    the rules that read it (module docstring)."""

    def __init__(self, model):
        super().__init__(model)
        self.spread_memo: dict = {}  # the spread rule's (op, inputs) -> finding: pairs share ops

    # -- sites (``sites``) and the precision rule (``precision``) ---------------

    def cut_sites(self, name, output) -> list[GraphSite]:
        return sites.cut_sites(self, name, output)

    def surrogate_sites(self, name, output) -> list[GraphSite]:
        return sites.surrogate_sites(self, name, output)

    def none_gradient_sites(self, name, output) -> list[GraphSite]:
        return sites.none_gradient_sites(self, name, output)

    def boundaries(self, name) -> list[tuple[float, str]]:
        return sites.boundaries(self, name)

    def precision(self) -> tuple[str | None, list[GraphSite]]:
        return precision_rule.precision(self)

    # -- culprits (here, ``spread``) and faults (``gradient_faults``) -----------

    def culprit(self, name, output, tol, order: int = 1) -> Culprit | None:
        return find_culprit(self, name, output, tol, order)

    def forward_culprit(self, name, output, probe) -> Culprit | None:
        return forward_culprit(self, name, output, probe)

    def rules_in_body(self, op) -> list:
        return rules_in_body(self, op)

    def user_gradient_ops(self, name, output) -> list:
        return spread.user_gradient_ops(self, name, output)

    def spread_culprit(self, name, output, tol, ops=None) -> tuple | None:
        return spread.spread_culprit(self, name, output, tol, self.spread_memo, ops)

    def raising_gradient(self, exc: BaseException) -> GraphSite | None:
        return gradient_faults.raising_gradient(self, exc)

    def nondeterministic_gradient(self) -> GraphSite | None:
        return gradient_faults.nondeterministic_gradient(self)

    def forward_rule_missing(self, name, output) -> GraphSite | None:
        return gradient_faults.forward_rule_missing(self, name, output)


def find_culprit(graph, name, output, tol, order: int = 1) -> Culprit | None:
    """The first op on the path whose own gradient disagrees with finite
    differences; with ``order=2``, whose gradient function's own derivative
    does (the op's gradient for a fixed random cotangent, as a function of
    the op's inputs, is the function checked)."""
    if not graph.trace():
        return None
    path = graph.path_ops(name, output)
    inside = graph.inside_custom_gradients(path)
    ops = [op for op in path if op not in inside and graph.checkable(op)]
    if not ops:
        return None
    feeds, feed_values, seen = graph.seen_values(ops)
    rng = np.random.default_rng(0)
    target = graph.outputs[output]
    seen[target.ref()] = np.asarray(graph.model.outputs[output])
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
        hit = _first_wrong(graph, op_order, feeds, feed_values, seen, tol, rng, to, order)
        if hit is not None:
            op, found, count = hit
            inner = _inside_library_wrapper(graph, op, tol, rng, order)
            if inner is None and order == 2:
                inner = _rule_inside_gradient(graph, op, tol)
            return inner or culprit_record(graph, op, found, count, what)
    return None


def _first_wrong(graph, ops, feeds, feed_values, seen, tol, rng, to, order):
    """(op, what convicted it, ops checked) of the first of ``ops`` whose
    gradient (to ``to``, or its own) is wrong (``check_op``), or None. In the
    scan to the output (``to``), an op whose gradient to the output cannot be
    resolved (``UNRESOLVED``) or checked at all (its check raises) ends the
    scan: the ops before it would be blamed for an error that may enter at it
    (every op after the culprit must be shown right).

    An op passed over (found right, or in its own scan unresolved or not
    checkable alone) is kept in the graph with the draws its check took
    (``graph.cleared_ops``; the feeds are the model's inputs and the values
    those at the point, the same for every pair of a graph): a later pair's
    search replays those draws on its own generator and goes on, so every op
    it does check sees the draws it saw before, and every pair's search sees
    one outcome for an op. A unit whose one wrong op fails many pairs (a
    wrong GELU inside a BERT layer fails nine) checked the same right ops once
    per pair: eight searches of 59 ops, 29 s of the unit's 153 s; and, in
    float32, the ops its local checks leave unresolved (the GELU's own among
    them) once per pair as well: 52 of its six searches' 107 local checks."""
    for count, op in enumerate(ops, start=1):
        key = (op.name, None if to is None else to.name, order, repr(tol))
        cleared = graph.cleared_ops.get(key)
        if cleared is not None:
            cleared.replay(rng)
            continue
        draws = RecordedDraws(rng)
        try:
            found = check_op(graph, op, feeds, feed_values, seen, tol, draws, to, order)
        except Exception:  # an op that cannot be fed or differenced alone: not shown right
            found = UNRESOLVED
        if found is UNRESOLVED and to is not None:
            return None
        if found is not None and found is not UNRESOLVED:
            return op, found, count
        # Passed over (right; in its own scan also unresolved or not
        # checkable alone): a later pair's search passes it over too.
        if draws.replayable:
            graph.cleared_ops[key] = draws
    return None


class RecordedDraws:
    """A numpy ``Generator`` whose ``standard_normal`` calls (the only draws a
    local check takes) are recorded by size, so that the same calls can be
    replayed on another generator (``_first_wrong``). Any other use of it is
    passed on and makes the record unfit to replay."""

    def __init__(self, rng):
        self.rng, self.sizes, self.replayable = rng, [], True

    def standard_normal(self, size=None, *args, **kwargs):
        if args or kwargs:
            self.replayable = False
        self.sizes.append(size)
        return self.rng.standard_normal(size, *args, **kwargs)

    def __getattr__(self, name):
        self.replayable = False
        return getattr(self.rng, name)

    def replay(self, rng) -> None:
        """Advance ``rng`` as the recorded calls advanced theirs."""
        for size in self.sizes:
            rng.standard_normal(size)


def _inside_library_wrapper(graph, op, tol, rng, order):
    """A ``tf.custom_gradient`` defined by a library, not the model file
    (``tf.recompute_grad``'s wrapper, a Keras utility), only passes its
    gradient through to the code it wraps: the code at fault is inside it.
    Its forward ops are checked one by one, in graph order, nested custom
    gradients as wholes; the first wrong one is the culprit, with the
    wrapper named. None when the wrapper is the user's or nothing inside
    is wrong on its own."""
    definition = gradient_definition(op)
    if custom_result_count(op) is None or not definition:
        return None
    if is_user_file(definition.rsplit(":", 1)[0]):
        return None
    region = [o for o in graph.graph.get_operations() if o in graph.inside_custom_gradients([op])]
    nested = graph.inside_custom_gradients(region)
    inner = [o for o in region if o not in nested and graph.checkable(o)]
    try:
        feeds, feed_values, seen = graph.seen_values(inner)
    except Exception:  # the region cannot be run in graph form: blame the wrapper
        return None
    hit = _first_wrong(graph, inner, feeds, feed_values, seen, tol, rng, None, order)
    if hit is None:
        return None
    found = culprit_record(graph, *hit, "own gradient")
    library = definition.split("site-packages" + os.sep)[-1]
    found.site.description += f", inside {describe(op)} (a library wrapper, {library})"
    return found


def _rule_inside_gradient(graph, op, tol) -> Culprit | None:
    """At order 2, the innermost rule at fault: ``op``'s gradient function
    (for a fixed random cotangent) may itself call gradients the user wrote
    (a custom gradient calling a custom-gradient function); the first of
    them whose own first-order gradient is wrong is where the second
    derivative goes wrong, not ``op`` that calls it. None when none is."""
    rng = np.random.default_rng(0)
    before = set(graph.graph.get_operations())
    try:
        first_gradients(graph, graph.local_inputs(op), graph.local_outputs(op), rng)
    except Exception:  # noqa: BLE001 - a gradient that cannot be built here says nothing
        return None
    created = [o for o in graph.graph.get_operations() if o not in before]
    nested = graph.inside_custom_gradients(created)
    rules = [
        o for o in created if o not in nested and graph.checkable(o)
        and (custom_result_count(o) is not None or override(o) is not None)
    ]
    if not rules:
        return None
    try:
        feeds, feed_values, seen = graph.seen_values(rules)
    except Exception:  # noqa: BLE001 - the gradient's ops cannot be run alone
        return None
    hit = _first_wrong(graph, rules, feeds, feed_values, seen, tol, rng, None, 1)
    if hit is None:
        return None
    return culprit_record(graph, *hit, f"own gradient, called in the gradient of {describe(op)}")


def forward_culprit(graph, name, output, probe) -> Culprit | None:
    """Where forward mode parts from reverse mode: TensorFlow's forward mode
    differentiates the forward ops of a ``tf.custom_gradient`` (and
    transposes registered gradients, so those agree with reverse mode),
    while reverse mode runs its gradient function. A wrong JVP with a right
    VJP therefore lives in a custom gradient on the path whose forward code
    is not differentiable as written (a ``stop_gradient``, a rounding, a
    ``py_function``); the outermost one on the path is named, with the
    probe that showed it (``probe``: (forward, numeric))."""
    if not graph.trace():
        return None
    path = graph.path_ops(name, output)
    inside = graph.inside_custom_gradients(path)
    custom = [op for op in path if op not in inside and custom_result_count(op) is not None]
    if not custom:
        return None
    op = custom[0]
    forward, numeric = probe
    others = f" ({len(custom) - 1} more custom gradient(s) on the path)" if len(custom) > 1 else ""
    site = graph.site(op, f"{graph.describe_op(op)}: forward mode differentiates its forward ops, "
                          f"reverse mode runs its gradient function{others}")
    return Culprit(
        site=site, definition=gradient_definition(op), analytic=forward, numeric=numeric,
        rel_error=abs(forward - numeric) / max(abs(numeric), abs(forward), np.finfo(float).tiny),
        checked_ops=len(custom), checked="forward ops' derivative",
    )
