"""The spread rule: a gradient the user wrote is checked beyond the model's point.

A check at one point sees only the range the point's activations cover, so a
``tf.custom_gradient`` or a ``gradient_override_map`` function defined in the
user's own files (``user_gradient_ops``; a library's, such as ``tf.nn.silu``'s,
is the library's) is also checked alone (``local_check.check_op``) at the
``SPREAD_POINTS`` around the inputs it receives (``spread_culprit``). A point
outside the function's domain gives no verdict, and a disagreement convicts
only when it holds again at a point moved by a relative 1e-3 (``_nearby``).
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from gradcli.model.core import is_user_file
from gradcli.verdicts.graph_ops import custom_result_count, gradient_definition, override
from gradcli.verdicts.local_check import UNRESOLVED, WrongShape, check_fingerprint, check_op, culprit_record


def _scaled_to(magnitude):
    """x scaled so its largest element has ``magnitude`` (sign pattern kept);
    an all-zero x becomes that constant."""
    def at(x):
        top = float(np.max(np.abs(x))) if np.size(x) else 0.0
        return np.full_like(x, magnitude) if top == 0 else x * (magnitude / top)
    return at


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
#: (``spread_culprit``): the inputs with their signs flipped, scaled
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


def _written_by_user(op) -> bool:
    """Whether ``op``'s gradient (a custom gradient's function, an override's
    registered function) is defined in the user's files, not a library's."""
    overridden = override(op)
    where = gradient_definition(op) if custom_result_count(op) is not None else (
        overridden[1].rsplit(" at ", 1)[-1] if overridden and overridden[1] else "")
    return bool(where) and is_user_file(where.rsplit(":", 1)[0])


def user_gradient_ops(graph, name, output) -> list:
    """The gradients the user wrote on the path from ``name`` to ``output``:
    ``tf.custom_gradient`` functions (a Keras layer's included) and ops
    whose gradient a ``gradient_override_map`` replaced, defined in the
    user's own files (a library's, such as ``tf.nn.silu``'s custom
    gradient, is the library's: an EfficientNet holds dozens)."""
    if not graph.trace():
        return []
    path = graph.path_ops(name, output)
    inside = graph.inside_custom_gradients(path)
    return [
        op for op in path
        if op not in inside and (custom_result_count(op) is not None or override(op) is not None)
        and graph.checkable(op) and _written_by_user(op)
    ]


def spread_culprit(graph, name, output, tol, memo: dict, ops=None) -> tuple | None:
    """The first user-written gradient on the path that is wrong at the
    inputs it receives or at a spread of inputs around them
    (``SPREAD_POINTS``, docs/verdict-rules.md): ``(Culprit, point)`` or None.

    A gradient the user wrote is checked where the model sends it and
    beyond, since a check at one point sees only the range the point's
    activations cover (a gradient wrong only for |x| > 2 passes at inputs
    within 1). Each op is checked alone, by ``check_op``'s probes, at each
    spread point (the point itself is the pair's own check); a point where
    the op or its differences are not finite is outside its domain and
    skipped. A disagreement convicts only when it holds again at a point
    moved by a relative 1e-3 (``_nearby``): a kink met exactly at a spread
    point (a custom relu at a zero) disagrees at that point alone.

    ``memo`` ((op, inputs) -> finding) is the graph's: pairs share ops.
    Beyond the graph a finding is kept only by the computation that made it
    (``_spread_finding``): a finding away from the point is proven by
    nothing at the point (where a warm check's program is proven), so a
    function checked again is traced again, and its op is probed again
    unless the fresh trace cuts out the very programs probed before, fed the
    very values. ``ops``: ``user_gradient_ops`` of the pair, where the
    caller has them."""
    ops = user_gradient_ops(graph, name, output) if ops is None else ops
    if not ops:
        return None
    seen = _Seen(graph, ops)
    start = graph.inputs[name].op
    for count, op in enumerate(ops, start=1):
        # Only the op's inputs that ``name`` reaches: its gradient with
        # respect to the others is another pair's (a custom matmul wrong in
        # its kernel gradient must not fail the data input's pair).
        only = {x.ref() for x in graph.local_inputs(op) if graph.depends_on(x.op, {start})}
        key = (op.name, tuple(sorted(x.name for x in graph.local_inputs(op) if x.ref() in only)))
        if key not in memo:
            # stored once complete: an interrupted search leaves no finding behind
            memo[key] = _spread_finding(graph, op, seen, tol, only, count)
        if memo[key] is not None:
            return memo[key]
    return None


class _Seen:
    """What the ops of ``spread_culprit`` saw at the point, each part taken
    once and only when asked: the model's inputs and their values
    (``feeds``), and the values of the ops' inputs and outputs (``values``:
    the graph run to them, which a finding kept by a key cut at the model's
    inputs does not need)."""

    def __init__(self, graph, ops):
        self.graph, self.ops = graph, ops
        self._feeds = self._values = None

    def feeds(self):
        """(the model's inputs, their values as tensors): ``point_feeds``."""
        if self._feeds is None:
            self._feeds = self.graph.point_feeds()
        return self._feeds

    def values(self):
        """``seen_values`` of the ops: (feeds, feed values, seen)."""
        if self._values is None:
            self._values = self.graph.seen_values(self.ops, self.feeds())
        return self._values


#: Spread findings kept by the key of the computation that made them
#: (``local_check.check_fingerprint``), least recently used dropped first.
KEPT_FINDINGS = 256
_KEPT: collections.OrderedDict = collections.OrderedDict()
_KEPT_LOCK = threading.Lock()
_NOT_KEPT = object()


def _spread_finding(graph, op, seen: _Seen, tol, only, count) -> tuple | None:
    """``(Culprit, point label)`` of the first spread point where ``op``'s
    gradient is wrong, at that point and nearby (``spread_culprit``), or None.
    Taken once per computation (``_KEPT``): the same programs fed the same
    values give the same finding, so a function checked again whose fresh
    trace cuts out the same op is not probed again; a changed closure,
    gradient function or point is another key. The key is cut at the model's
    inputs where the ops from them to ``op`` hold no state (then a warm
    check's key runs nothing: 2.4 of a warm custom gradient's 13.2 ms were
    the run to what the op saw), else at the op, fed what it saw."""
    key = _key(graph, op, seen, tol, only, cut_at_op=False)
    if key is None:
        key = _key(graph, op, seen, tol, only, cut_at_op=True)
    with _KEPT_LOCK:  # checks beside each other (the joint check's thread) share it
        found = _KEPT.get(key, _NOT_KEPT) if key is not None else _NOT_KEPT
        if found is not _NOT_KEPT:
            _KEPT.move_to_end(key)
    if found is _NOT_KEPT:
        found = _first_wrong_point(graph, op, *seen.values(), tol, only)
        if key is not None:
            with _KEPT_LOCK:
                _KEPT[key] = found
                while len(_KEPT) > KEPT_FINDINGS:
                    _KEPT.popitem(last=False)
    if found is None:
        return None
    probe, label = found
    return culprit_record(graph, op, probe, count, f"own gradient at {label}"), label


def _key(graph, op, seen: _Seen, tol, only, cut_at_op: bool) -> tuple | None:
    """``check_fingerprint`` cut at the op (fed what it saw) or at the model's
    inputs; None where no digest stands for the computation."""
    try:
        if cut_at_op:
            return check_fingerprint(graph, op, *seen.values(), tol, only)
        return check_fingerprint(graph, op, *seen.feeds(), None, tol, only)
    except Exception:  # noqa: BLE001 - no key: taken, not kept
        return None


def _first_wrong_point(graph, op, feeds, feed_values, seen, tol, only) -> tuple | None:
    """``(probe, point label)`` of the first of ``SPREAD_POINTS`` where
    ``check_op`` convicts ``op``'s gradient, there and nearby, or None."""
    for label, at in SPREAD_POINTS:
        found = None
        for where in (at, _nearby(at)):
            try:
                found = check_op(graph, op, feeds, feed_values, seen, tol,
                                 np.random.default_rng(0), at=where, only=only)
            except Exception:  # an op that cannot be fed or differenced alone
                found = None
            if found is None or found is UNRESOLVED or isinstance(found, WrongShape):
                found = None
                break
        if found is not None:
            return found, label
    return None
