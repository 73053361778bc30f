"""Numeric derivatives: central differences with one Richardson step, batched.

One mechanism serves every numeric derivative gradcli takes: the derivative of
``function`` (a dict of tensors -> dict of output tensors) at ``point`` along a
batch of directions in one input. Unit directions (``along_axes``) give Jacobian
columns; random directions (``along``) give projections for the fast check; the
same code differences a gradient function for Hessian checks.

Three modules, one engine:

* ``numerics.difference_rule``: the numeric rule, pure numpy: the step rule
  (``step_size``, ``dense_step_size``), the two passes, Richardson
  extrapolation and its error estimate, the settling rule and the kink gap of
  the one-sided slopes. Its docstring states each rule with its reasons.
* ``numerics.evaluators``: who computes f at the points. ``FiniteDifferences``
  asks its ``evaluator`` (the public protocol ``PairEvaluator.evaluate_pairs``)
  for f(x + s d) and f(x - s d) and forms every quotient itself; the default,
  ``ModelEvaluator``, runs the model in place, vectorised, looped or eagerly
  (its docstring says when and why). A caller that evaluates the points
  elsewhere supplies its own evaluator and gets the same points, in the same
  order, and the same numbers from them.
* this module: ``FiniteDifferences``, which groups the inputs, takes the steps,
  cuts each pass into chunks (reporting progress) and hands both passes to the
  rule. Every name of the other two that callers use is importable from here.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from gradcli import progress

# The rule's and the evaluators' names are re-exported (``__all__``): callers
# import them from here.
from gradcli.numerics.difference_rule import (
    KINK_GAP,
    LEVELS,
    RICHARDSON_RATIO,
    ROUNDOFF_ULPS,
    ROUNDOFF_ULPS_16BIT,
    SIGNS,
    Central,
    Derivatives,
    coarser,
    dense_step_size,
    machine_eps,
    quotients,
    richardson,
    roundoff_ulps,
    step_size,
)
from gradcli.numerics.evaluators import (
    CHUNK_BYTES,
    EAGER_MAX_POINTS,
    IN_PLACE_CHUNK,
    LOOPED_MIN_ELEMENTS,
    ModelEvaluator,
    PairEvaluator,
    chunk_size,
    points_looped,
)
from gradcli.results.words import name_list
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

__all__ = [
    "CHUNK_BYTES", "EAGER_MAX_POINTS", "IN_PLACE_CHUNK", "KINK_GAP", "LEVELS", "LOOPED_MIN_ELEMENTS",
    "RICHARDSON_RATIO", "ROUNDOFF_ULPS", "ROUNDOFF_ULPS_16BIT", "SHARED_GROUP_MAX", "SIGNS", "Central",
    "Derivatives", "FiniteDifferences", "ModelEvaluator", "PairEvaluator", "chunk_size", "coarser",
    "dense_step_size", "machine_eps", "roundoff_ulps", "step_size",
]

#: Inputs are differenced together in one group, smallest first, while the
#: group stays within this many elements; larger inputs get a group of their
#: own. Rule: a group costs one trace of the model (0.3-0.6 s) and, where XLA
#: pays (``in_place.XLA_PAYS_SECONDS``), one compilation (0.6-2.6 s); each of
#: its evaluations reads its inputs from a split of the group's vector, a copy
#: (about 1.6 ns per element per direction plain), so a group of S elements
#: pays about 1.6 ns * S**2 over its pass. Many small groups also each stay
#: under XLA's threshold and run plain, 4-7x slower per evaluation on a
#: keras-hub transformer. Measured (full check, 2 cores, bench/README.md) at
#: 8,192 / 16,384 / 32,768 / 65,536 elements: MLPs of 10k weights 1.47 / 1.19
#: / 1.07 / 1.18 s and 43k 3.86 / 3.36 / 3.48 / 5.30 s; 2-layer keras-hub
#: GPT-2 14.8 / 13.9 / 11.6 / 11.6 s, BERT 19.7 / 16.4 / 13.9 / 16.0 s, Llama
#: 26.4 / 23.4 / 20.0 / 22.1 s. 32,768 is the fastest or within noise of it
#: on all five; past it the copies of one large group cost more than traces.
SHARED_GROUP_MAX = 32768
#: auto's prediction (``predict_axes_seconds``) times this many chunks of a
#: group after its first and takes the fastest: two, so that one chunk slowed
#: by another process does not set the rate.
TIMED_CHUNKS = 2
#: A caller whose decision stops depending on the prediction past a figure
#: (``predict_axes_seconds``' ``beyond``) is answered from chunks of
#: QUICK_DIRECTIONS directions (the first untimed: the trace; the faster of
#: the next two, as for TIMED_CHUNKS) when they predict over QUICK_MARGIN
#: times that figure, and the faster took at least QUICK_MIN_SECONDS (a
#: call's own overhead, about a millisecond, is then a few percent of it): a
#: wrong GELU inside BERT-base timed three chunks of 512 directions of its
#: transformer layer (19 s) to learn that re-checking its 24,576 inputs
#: would take 274 s, where what it decided was settled past 107 s. There the
#: quick rate was 10.7 ms a direction against the chunks' 11.2: the margin
#: leaves a half for a quick chunk slowed where the chunks were not.
QUICK_DIRECTIONS = 8
QUICK_MARGIN = 1.5
QUICK_MIN_SECONDS = 0.05


class LaidOut(dict):
    """Directions (name -> ``[k, *shape]``) that are views into one ``block``
    ``[k, group size]`` with ``layout`` (``FiniteDifferences.laid_out``)."""

    def __init__(self, views: dict, block: np.ndarray, layout: tuple):
        super().__init__(views)
        self.block, self.layout = block, layout


def largest_magnitude(a: np.ndarray, axis=None):
    """max |a| (along ``axis``), 0 for no element: the same number as
    ``np.abs(a).max(axis, initial=0.0)`` (a NaN stays NaN), without the
    array of magnitudes (187 MB for an embedding table in float64)."""
    return np.maximum(a.max(axis=axis, initial=0.0), -a.min(axis=axis, initial=0.0)) + 0.0  # + 0.0: -0.0 -> 0.0


@dataclass
class FiniteDifferences:
    """Numeric derivatives of ``function`` at ``point`` (see module docstring).

    Inputs are perturbed through one flat vector per *group*: with
    ``joint=True`` all of ``wrt`` form one group (one trace serves every input:
    tracing a model costs about 0.3 s, which dominates small checks); otherwise
    the smallest inputs share one group up to SHARED_GROUP_MAX elements and each
    larger one is alone. The other inputs stay fixed tensors of the trace, so
    an evaluation touches only the perturbed group.
    """

    function: Callable[[dict], dict]
    point: dict[str, np.ndarray]
    outputs: list[str]
    wrt: list[str] = field(default_factory=list)
    joint: bool = False
    #: The function has non-smooth ops (``verdicts.excuses.has_nonsmooth_op``):
    #: dense directions (``along``, ``along_joint``) step ``dense_step_size``.
    nonsmooth: bool = False
    chunk: int | None = None  # directions per chunk; None: ``chunk_size`` of the group
    #: XLA: True always, False never, None where it pays (``numerics.in_place``;
    #: batched chunks compile only with True).
    jit_compile: bool | None = None
    evaluations: int = 0
    eager: bool = False  # set when tracing failed and points run one by one
    #: The lowest precision the function computes in (``ModelGraph.precision``,
    #: e.g. float32 inside a model fed float64): steps and round-off bounds follow
    #: its eps, since a step below its resolution is lost inside the function.
    precision: str | None = None
    #: The outputs at the point, if known: ``along_axes`` then also returns
    #: one-sided slopes (``Derivatives.one_sided``) for the kink scan.
    center: dict | None = None
    #: The same function already traced at the point's shapes (the precision
    #: rule's graph, ``ModelGraph.callable``), or None: points run one by one
    #: (``ModelEvaluator.eager_sides``) call it instead of running the model
    #: eagerly, ten times cheaper for a network of small ops (a 1M-weight
    #: Transformer: 7 ms a call against 75 ms eagerly, most of it the
    #: interpreter's).
    traced: Callable[[dict], dict] | None = None
    #: Who evaluates the points (``evaluators.PairEvaluator``); None: the model
    #: itself (``ModelEvaluator``). Any evaluator gets the same points in the
    #: same order, and the quotients are formed here from what it returns.
    evaluator: PairEvaluator | None = field(default=None, repr=False)
    #: The default evaluator's traces and in-place loops, by group and path.
    _compiled: dict = field(default_factory=dict, repr=False)
    #: Chunks auto's timing evaluated (``predict_axes_seconds``), by group,
    #: kind, rows and steps: the check's first pass takes them, once each.
    _timed: dict = field(default_factory=dict, repr=False)
    #: name -> (the point's array, its max |x|): ``_point_magnitude``.
    _magnitudes: dict = field(default_factory=dict, repr=False)
    #: Seconds per direction along axes, once timed (``predict_axes_seconds``).
    _rate: float | None = field(default=None, repr=False)
    #: Seconds per direction from the quick timing (``_quick_rate``), once taken.
    _quick: float | None = field(default=None, repr=False)
    #: Directions along axes each group still has ahead in the caller's plan
    #: (``plan_axes``), beyond the ``along_axes`` call at hand.
    _axes_ahead: dict = field(default_factory=dict, repr=False)
    #: The model evaluator: the default ``evaluator``, and always the one that
    #: evaluates plain points (``evaluate``) and points of several groups.
    _model_evaluator: ModelEvaluator = field(init=False, repr=False)

    def __post_init__(self):
        self._model_evaluator = ModelEvaluator(self, self._compiled)
        if self.evaluator is None:
            self.evaluator = self._model_evaluator

    def rule_dtype(self, dtype):
        """The dtype whose eps rules steps and round-off: the point's, or the
        coarser compute precision."""
        return coarser(dtype, self.precision)

    def group(self, name: str) -> tuple[str, ...]:
        """The inputs differenced together with ``name``: one flat vector, so one
        dtype (a float32 weight beside a float64 input keeps its own group, its
        own steps, and reaches the model as float32). Not ``joint``: the
        smallest inputs share one group up to SHARED_GROUP_MAX elements, each
        larger input is alone."""
        if name not in self.wrt:
            return (name,)
        dtype = self.point[name].dtype
        same = tuple(n for n in self.wrt if self.point[n].dtype == dtype)
        if self.joint:
            return same
        shared, total = set(), 0
        for n in sorted(same, key=lambda n: self.point[n].size):
            total += self.point[n].size
            if total > SHARED_GROUP_MAX:
                break
            shared.add(n)
        if name in shared:
            return tuple(n for n in same if n in shared)
        return (name,)

    def offset(self, name: str) -> int:
        group = self.group(name)
        return sum(self.point[n].size for n in group[: group.index(name)])

    def along_axes(
        self, name: str, indices: np.ndarray | None = None, settled: Callable | None = None,
        step_scale: float = 1.0,
    ) -> Derivatives:
        """Derivatives along unit vectors e_i of input ``name`` (all i by default).

        ``settled(values, roundoff)``, if given, receives pass 1's D(h) and its
        round-off bound (dicts of ``[k, *output_shape]``) and returns which of
        the k directions need no second pass (see the module docstring).
        ``step_scale`` times the step rule's step (the round-off retry,
        ``ROUNDOFF_RETRY``)."""
        x = self.point[name]
        group = self.group(name)
        if indices is None:
            indices = np.arange(x.size)
            if group in self._axes_ahead:  # the planned pass along this input (``plan_axes``)
                self._axes_ahead[group] = max(0, self._axes_ahead[group] - x.size)
        indices = np.asarray(indices, dtype=np.int64)
        return self.richardson(group, "axes", indices + self.offset(name),
                               self.axis_steps(name, indices, step_scale), settled)

    def plan_axes(self, names: list[str]) -> None:
        """The caller will take ``along_axes`` of every element of ``names``
        (the full check's pass): a group's directions still to come then
        count those of its inputs not yet taken, so the XLA rule
        (``in_place.InPlaceLoop.worth_compiling``) sees the group's whole pass,
        not one input's. A group of many inputs of a few thousand elements
        each (a keras-hub transformer's weights) never compiled, each input's
        share predicted under ``XLA_PAYS_SECONDS``: a 2-layer Llama's 46,012
        directions ran plain at 0.27 ms each."""
        self._axes_ahead = {}
        for n in names:
            group = self.group(n)
            self._axes_ahead[group] = self._axes_ahead.get(group, 0) + int(self.point[n].size)

    def axis_steps(self, name: str, indices: np.ndarray, step_scale: float = 1.0) -> np.ndarray:
        """The steps along unit vectors e_i of input ``name`` (``step_size``'s
        rule, times ``step_scale``), each made so that x_i + h is exactly
        representable: the step taken is the step divided by."""
        flat = self.point[name].reshape(-1)[indices]
        return (flat + step_scale * step_size(flat, self.rule_dtype(flat.dtype))) - flat

    def along(self, name: str, directions: np.ndarray, step_scale: float = 1.0) -> Derivatives:
        """Derivatives along ``directions`` (shape ``[k, *input_shape]``);
        ``step_scale`` times the step rule's step (``analyses.check.fast.FastCheck``'s
        round-off retry, ``ROUNDOFF_RETRY``)."""
        group, embedded, h = self._embedded({name: directions}, step_scale)
        return self.richardson(group, "directions", embedded, h)

    def _embedded(self, directions: dict, step_scale: float = 1.0) -> tuple:
        """(group, embedded directions ``[k, group size]``, steps ``[k]``) for
        directions of some inputs of one group (zeros for the group's others),
        the steps by ``direction_steps``."""
        names = list(directions)
        group = self.group(names[0])
        dtype = self.point[names[0]].dtype
        rows = {n: np.asarray(directions[n], dtype=dtype).reshape(-1, self.point[n].size) for n in names}
        if isinstance(directions, LaidOut) and directions.layout == self.layout(group):
            return group, directions.block, self.direction_steps(rows, step_scale)  # the block itself
        embedded = np.zeros((len(rows[names[0]]), sum(self.point[n].size for n in group)), dtype)
        for n, row in rows.items():
            start = self.offset(n)
            embedded[:, start : start + self.point[n].size] = row
        return group, embedded, self.direction_steps(rows, step_scale)

    def layout(self, group) -> tuple:
        """The flat vector of ``group`` that ``_embedded`` builds: its dtype
        and each input's (name, shape), in order."""
        return (self.point[group[0]].dtype,) + tuple((n, self.point[n].shape) for n in group)

    def laid_out(self, names, block: np.ndarray | None = None, rows: int = 0) -> "LaidOut":
        """Directions of every input of ``names``' group as views into one
        block ``[k, group size]`` laid out as ``_embedded`` lays it out:
        ``block`` when given, else a new uninitialised one of ``rows`` rows
        for the caller to fill through the views. ``along_joint`` and
        ``joint_pairs`` then evaluate the block itself: no copy of a whole
        model's directions (0.99 GB per probe at GPT-2 small's 124M weights)."""
        group = self.group(next(iter(names)))
        dtype = self.point[group[0]].dtype
        if block is None:
            block = np.empty((rows, sum(self.point[n].size for n in group)), dtype)
        views, start = {}, 0
        for n in group:
            size = self.point[n].size
            views[n] = block[:, start : start + size].reshape((len(block),) + self.point[n].shape)
            start += size
        return LaidOut(views, block=block, layout=self.layout(group))

    def direction_steps(self, directions: dict, step_scale: float = 1.0) -> np.ndarray:
        """Steps ``[k]`` along directions of some inputs of one group (each
        ``[k, ...]``). Rule: ``step_size`` (``dense_step_size`` through
        non-smooth ops) of the largest |x| over those inputs, divided by each
        direction's largest element, times ``step_scale``."""
        names = list(directions)
        dtype = self.point[names[0]].dtype
        rows = [np.asarray(directions[n]).reshape(len(directions[n]), -1) for n in names]
        longest = np.max([largest_magnitude(r, axis=1) for r in rows], axis=0).astype(dtype)
        longest = np.where(longest > 0, longest, 1.0)
        largest = max(self._point_magnitude(n) for n in names)
        rule = dense_step_size if self.nonsmooth else step_size
        return step_scale * rule(largest, self.rule_dtype(dtype)) / longest

    def _point_magnitude(self, name: str) -> float:
        """max |x| of input ``name`` at the point, kept per array (a layer's
        7.1M weights are read once, not at every chunk of directions)."""
        value = self.point[name]
        kept = self._magnitudes.get(name)
        if kept is None or kept[0] is not value:
            kept = self._magnitudes[name] = (value, largest_magnitude(np.asarray(value)))
        return kept[1]

    def anew(self, **changes) -> "FiniteDifferences":
        """The same rules (step, precision, non-smooth flag, XLA policy) for
        another point or function (``changes``: the fields that differ), with
        nothing of this one's carried over: no traces, no timings, no
        evaluations counted (the caller adds them to its own count). A traced
        function (``traced``) stays only for the same function at a point of
        the same shapes: it is that function's graph at those shapes. The
        evaluator is the model's again (a supplied one evaluates for this
        instance only)."""
        point = changes.get("point", {})
        if "function" in changes or any(np.shape(v) != np.shape(self.point.get(n)) for n, v in point.items()):
            changes.setdefault("traced", None)
        return dataclasses.replace(self, evaluations=0, _compiled={}, _timed={}, _magnitudes={}, _rate=None,
                                   _quick=None, evaluator=None, **changes)

    def joint_group(self, names) -> bool:
        """Whether ``names`` are one group (``along_joint`` can move them at once)."""
        names = list(names)
        return bool(names) and set(self.group(names[0])) == set(names)

    def along_joint(self, directions: dict, step_scale: float = 1.0) -> Derivatives | None:
        """Derivatives along directions that move every input of ``directions``
        (each ``[k, *input_shape]``) at once: one set of evaluations for the
        whole model instead of one per input. None when the inputs are not one
        group (``group``: ``joint`` and one dtype); the caller goes input by input.

        Step rule: as ``along`` takes it for one input, from the largest |x|
        over the inputs (``step_scale`` as there)."""
        planned = self.joint_steps(directions, step_scale)
        if planned is None:
            return None
        group, embedded, h = planned
        return self.richardson(group, "directions", embedded, h)

    def joint_steps(self, directions: dict, step_scale: float = 1.0) -> tuple | None:
        """``_embedded`` for directions of every input of one group (``along_joint``'s
        rule), or None when the inputs are not one group."""
        if not self.joint_group(directions):
            return None
        return self._embedded(directions, step_scale)

    def joint_pairs(self, directions: dict, steps) -> tuple[dict, dict]:
        """f(x + s d_j) and f(x - s d_j) per output for the joint directions d_j
        and each row of ``steps`` (``[levels, k]``: a step per level and
        direction), each ``[levels * k, *output_shape]``, level-major: the
        evaluation ``along_joint`` uses, for callers that form their own
        quotients (``diagnose.directional_slopes``). The directions are
        embedded once and evaluated level by level: never a copy per level.
        Inputs of several groups (``diagnose.tie_direction``'s ties across
        inputs) are evaluated point by point (``_point_pairs``)."""
        if not self.joint_group(directions):
            return self._point_pairs(directions, steps)
        group, embedded, _ = self.joint_steps(directions)
        ups, downs = [], []
        for row in np.asarray(steps, dtype=embedded.dtype):
            up, down = self.evaluator.evaluate_pairs(group, "directions", embedded, row)
            ups.append(up)
            downs.append(down)
            self.evaluations += 2 * len(row)
        join = lambda parts: {o: np.concatenate([np.asarray(p[o]) for p in parts]) for o in parts[0]}  # noqa: E731
        return join(ups), join(downs)

    def _point_pairs(self, directions: dict, steps) -> tuple[dict, dict]:
        """``joint_pairs`` for directions of inputs of several groups: each
        point x + s d_j (every moved input at once, the others as they are) is
        one call (``ModelEvaluator.eager_sides``); the outputs in the first moved input's
        dtype."""
        steps = np.asarray(steps)
        k = steps.shape[1]

        def moved(j, sign):  # level-major, as joint_pairs orders its points
            step = steps[j // k, j % k]
            return {n: tf.constant(self.point[n] + np.asarray(d[j % k], self.point[n].dtype)
                                   * self.point[n].dtype.type(sign * step))
                    for n, d in directions.items()}

        self.evaluations += 2 * steps.size
        return self._model_evaluator.eager_sides(moved, steps.size, self.point[next(iter(directions))].dtype)

    def one_batch_per_group(self, names) -> bool:
        """Whether the first pass along every axis of ``names`` is one chunk per group."""
        groups = list(dict.fromkeys(self.group(n) for n in names))
        return all(
            sum(self.point[n].size for n in g) <= self.chunk_length(g, "axes") for g in groups
        )

    def predict_axes_seconds(self, names: list[str], beyond: float | None = None) -> float | None:
        """Predicted seconds of the first pass along every axis of ``names``, or
        None when every group's first pass is a single chunk (timing it would cost
        as much as running it).

        Rule: one input is timed for all, the largest (its chunks are the
        fullest). Every direction of every input is two evaluations of the
        whole model (the inputs differ in which values they move, not in what
        they evaluate), so its rate is the model's; timing each input group
        cost a trace of the model in a loop and chunks per group, which is
        minutes for a network of many weight tensors (a 1M-weight
        Transformer: 124 s timed group by group). Its first chunk runs untimed
        (tracing, and XLA compiling, are paid here and reused by the check),
        then its next ``TIMED_CHUNKS`` chunks (the first again when there is
        no other) each timed; the prediction is the fastest of them per
        direction times the directions of every input: a chunk's time only
        ever gains noise (another process on the core, the allocator's first
        use), so the fastest is the steady rate, as ``timeit`` takes its
        minimum. One timed chunk of a 2-layer GPT-2 took 0.20-0.24 s against
        the pass's median of 0.13 s, and predicted 8-18 s for a 6 s pass.
        The chunks are the ones the full check's first pass starts with, at
        the same steps (``along_axes``' rule): kept (``_timed``), it takes
        them instead of evaluating them again. The evaluations count towards
        ``evaluations``: they are spent, whichever check runs. The rate, the
        model's, is timed once: a later call (another failing input's
        element-wise re-check, ``FastCheck.sample_within_budget``) takes it,
        where timing again cost three chunks of 512 directions per input (a
        wrong GELU inside BERT-base: 39 s of its layer's re-checks, for chunks
        its sampled re-checks never used).

        ``beyond``: the figure past which the caller's decision no longer
        depends on the prediction; then a quick timing that predicts over
        ``QUICK_MARGIN`` times it is the answer (``_quick_rate``), and the
        chunks are not timed. A quick rate may overstate theirs (a slowed
        chunk, a call's own overhead): hence the margin, the faster of two
        and the floor on its duration."""
        if self.one_batch_per_group(names):
            return None
        total = sum(self.point[n].size for n in dict.fromkeys(names))
        if self._rate is not None:
            return self._rate * total
        name = max(names, key=lambda n: self.point[n].size)  # the first of the largest
        group = self.group(name)
        chunk, size = self.chunk_length(group, "axes"), self.point[name].size
        parts = [np.arange(start, min(start + chunk, size)) for start in range(0, size, chunk)]
        if beyond is not None:
            quick = self._quick_rate(name, parts[0])
            if quick is not None and quick * total > QUICK_MARGIN * beyond:
                return quick * total
        timed = parts[1 : 1 + TIMED_CHUNKS] or parts[:1]
        rate = np.inf
        for is_timed, rows in [(False, parts[0])] + [(True, rows) for rows in timed]:
            started = time.perf_counter()
            self.first_pass_ahead(name, rows)
            if is_timed:
                rate = min(rate, (time.perf_counter() - started) / len(rows))
        self._rate = rate
        return rate * total

    def first_pass_ahead(self, name: str, rows: np.ndarray) -> None:
        """The first pass along the axes ``rows`` of ``name`` (one chunk, at
        ``along_axes``' steps), evaluated now and kept (``_timed``) for the
        pass that takes it, once: auto's timing chunks, and a sample's first
        elements, whose check and the whole sample's share them
        (``FastCheck.sampled_pairs``, ``take_timed``)."""
        rows = np.asarray(rows, dtype=np.int64)
        h = self.axis_steps(name, rows)
        part = rows + self.offset(name)
        self._timed[_chunk_key(self.group(name), "axes", part, h)] = self._chunk(self.group(name), "axes", part, h)
        self.evaluations += len(SIGNS) * len(h)

    def _quick_rate(self, name: str, rows) -> float | None:
        """Seconds per direction along axes of ``name``'s group from chunks of
        ``QUICK_DIRECTIONS`` of its ``rows``: the first untimed (the trace),
        the faster of the next two; taken once. None when ``rows`` are too
        few or the faster chunk took under ``QUICK_MIN_SECONDS``."""
        if self._quick is None and len(rows) >= 3 * QUICK_DIRECTIONS:
            group, fastest = self.group(name), np.inf
            for i in range(3):
                part = rows[i * QUICK_DIRECTIONS:(i + 1) * QUICK_DIRECTIONS]
                h = self.axis_steps(name, part)
                started = time.perf_counter()
                self._chunk(group, "axes", part + self.offset(name), h)
                if i:
                    fastest = min(fastest, time.perf_counter() - started)
                self.evaluations += len(SIGNS) * len(h)
            self._quick = fastest / QUICK_DIRECTIONS if fastest >= QUICK_MIN_SECONDS else np.nan
        return None if self._quick is None or np.isnan(self._quick) else self._quick

    def timed_rows(self, name: str) -> int:
        """How many leading elements of ``name`` the timing
        (``predict_axes_seconds``) has evaluated along their axes at the first
        pass's steps: a check that keeps them pays nothing for their first
        pass (``take_timed``)."""
        group, start = self.group(name), self.offset(name)
        rows: set[int] = set()
        for timed_group, kind, part, _ in self._timed:
            if timed_group == group and kind == "axes":
                rows.update((np.frombuffer(part, dtype=np.int64) - start).tolist())
        leading = 0
        while leading in rows:
            leading += 1
        return leading

    def take_timed(self, other: "FiniteDifferences") -> None:
        """The chunks ``other``'s timing evaluated, for a function equal to
        ``other``'s on them: the same group, rows and steps are the same points
        (``FastCheck.sampled_pairs``: a sample and its prefix). The first pass
        takes each once, as it takes its own."""
        self._timed.update(other._timed)

    def evaluate(self, name: str, points: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs at each of ``points`` (shape ``[k, *input_shape]``) for input
        ``name``, other inputs at the point: the same batched (or eager fallback)
        evaluation the differences use, for callers that form their own quotients
        (one-sided ladders, Taylor remainders)."""
        points = np.asarray(points, dtype=self.point[name].dtype).reshape(len(points), -1)
        result = self._model_evaluator.evaluate_points(name, points)
        self.evaluations += len(points)
        return result

    def axis_pairs(self, name: str, indices, steps) -> tuple[dict, dict]:
        """f(x + s_k e_i_k) and f(x - s_k e_i_k) per output (``[k, *output_shape]``)
        for flat element ``indices`` of input ``name`` and their ``steps``, other
        inputs at the point: the evaluation ``along_axes`` uses (in place, no
        copy of x per point), for callers that form their own quotients
        (``verdicts.diagnose``'s one-sided ladders)."""
        group = self.group(name)
        part = np.asarray(indices, dtype=np.int64) + self.offset(name)
        steps = np.asarray(steps, dtype=self.point[name].dtype)
        up, down = self.evaluator.evaluate_pairs(group, "axes", part, steps)
        self.evaluations += 2 * len(steps)
        return up, down

    # -- one batched mechanism for both kinds of direction ---------------------

    def richardson(self, group, kind, batch, h, settled=None) -> Derivatives:
        """The two passes of ``difference_rule.richardson`` along the rows of
        ``batch`` (``kind`` and rows as ``PairEvaluator.evaluate_pairs`` takes
        them) with steps ``h``: pass 1 everywhere, pass 2 where ``settled``
        does not say otherwise. Public for evaluators that form the points
        themselves: their directions need not be embedded (``batch`` may have
        no columns)."""
        rule = self.rule_dtype(self.point[group[0]].dtype)

        def central(rows, steps, stage):
            # Every row again (the second level along every joint probe): the
            # block itself, not a copy of it (rows are sorted, as flatnonzero gives them).
            every = rows is None or len(rows) == len(batch)
            return self._central(group, kind, batch if every else batch[rows], steps, stage)

        return richardson(central, h, self.outputs, rule, settled)

    def _central(self, group, kind, batch, h, stage: str = "finite differences") -> Central:
        """D(h) along every row of ``batch``, in chunks of a fixed shape (one trace)."""
        k = len(h)
        chunk = self.chunk_length(group, kind)
        values: dict[str, list] = {o: [] for o in self.outputs}
        largest: dict[str, list] = {o: [] for o in self.outputs}
        forward: dict[str, list] = {o: [] for o in self.outputs}
        backward: dict[str, list] = {o: [] for o in self.outputs}
        detail = _progress_detail(name_list(group, PROGRESS_NAMES), kind, [self.group(n) for n in self.wrt], group)
        progress.report(stage, 0, k, detail)
        for start in range(0, k, chunk):
            part = batch[start : start + chunk]
            steps = h[start : start + chunk]
            # XLA compiles once per shape: every batched chunk gets the same one
            # (the in-place loop pads its own calls).
            pad = chunk - len(steps) if k > chunk and self.jit_compile and kind != "axes" else 0
            if pad:
                part = np.concatenate([part, np.repeat(part[-1:], pad, axis=0)])
                steps = np.concatenate([steps, np.repeat(steps[-1:], pad)])
            # Keyed only when something is kept: a key is a copy of the chunk's
            # rows, 0.87 GB for a joint direction of BERT-base's 109M weights.
            timed = self._timed.pop(_chunk_key(group, kind, part, steps), None) if self._timed else None
            ahead = self._axes_ahead.get(group, 0) if kind == "axes" else 0
            d, fmax, sides = timed or self._chunk(group, kind, part, steps, remaining=max(0, k - start - chunk) + ahead)
            keep = len(steps) - pad
            if timed is not None:  # evaluated, and counted, by auto's timing
                self.evaluations -= len(SIGNS) * keep
            for o in self.outputs:
                values[o].append(np.asarray(d[o])[:keep])
                largest[o].append(np.asarray(fmax[o])[:keep])
                if sides:
                    forward[o].append(np.asarray(sides["forward"][o])[:keep])
                    backward[o].append(np.asarray(sides["backward"][o])[:keep])
            self.evaluations += len(SIGNS) * keep
            progress.report(stage, min(start + chunk, k), k, detail)
        joined = lambda parts: {o: np.concatenate(v) for o, v in parts.items() if v}  # noqa: E731
        return Central(
            values=joined(values), largest=joined(largest),
            forward=joined(forward), backward=joined(backward),
        )

    def chunk_length(self, group, kind) -> int:
        """Directions per chunk: ``chunk`` if set; in place, IN_PLACE_CHUNK (no
        copies: the chunk only sets how often progress is reported); dense
        directions of a large group, formed inside a traced loop
        (``evaluators.points_looped``): IN_PLACE_CHUNK too; batched copies, as
        many as fit CHUNK_BYTES (``chunk_size``)."""
        if self.chunk:
            return self.chunk
        if kind == "axes" and not self.eager:
            return IN_PLACE_CHUNK
        elements = sum(self.point[n].size for n in group)
        if kind == "directions" and not self.eager and self._loops(1, elements):
            return IN_PLACE_CHUNK
        return chunk_size(elements, self.point[group[0]].dtype.itemsize)

    def _loops(self, directions: int, elements: int) -> bool:
        """``LOOPED_MIN_ELEMENTS``' rule for ``directions`` dense directions:
        a traced loop forms the points, unless the function is traced already."""
        return points_looped(directions, elements, self.traced)

    def _chunk(self, group, kind, part, steps, remaining: int = 0):
        """D(s) along each row of one chunk, its max |f|, and (axes with a
        centre) the one-sided quotients: the evaluator gives f(x + s d) and
        f(x - s d), and every quotient is formed in numpy
        (``difference_rule.quotients``), whichever way the points were
        evaluated."""
        up, down = self.evaluator.evaluate_pairs(group, kind, part, steps, remaining)
        return quotients(up, down, steps, self._center(group) if kind == "axes" else None)

    def _center(self, group):
        """f(x) per output in the group's dtype, when known (``center``)."""
        if self.center is None:
            return None
        dtype = self.point[group[0]].dtype
        return {o: np.asarray(self.center[o]).astype(dtype) for o in self.outputs}


def _chunk_key(group, kind, part, steps) -> tuple:
    """What makes two chunks the same evaluation: the group, the kind of
    directions, the rows and the steps, to the bit."""
    return tuple(group), kind, np.asarray(part).tobytes(), np.asarray(steps).tobytes()


#: A progress row names at most this many inputs of a pass, then counts the rest:
#: a row listing BERT-base's 199 weights was 10,783 characters long.
PROGRESS_NAMES = 2


def _progress_detail(names: str, kind: str, groups: list, group) -> str:
    """What a progress row says of a pass: the inputs, which of the inputs
    (``input 3 of 6`` when there are several groups) and the kind of
    directions (``axes``: every element, a full check; else random probes)."""
    distinct = list(dict.fromkeys(groups))
    where = f", input {distinct.index(group) + 1} of {len(distinct)}" if len(distinct) > 1 and group in distinct else ""
    return f"{names}{where} ({'every element' if kind == 'axes' else 'random probes'})"
