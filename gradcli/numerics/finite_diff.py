"""Numeric derivatives: central differences with one Richardson step, batched.

One mechanism serves every numeric derivative gradcli takes: the derivative of
``function`` (a dict of tensors -> dict of output tensors) at ``point`` along a
batch of directions in one input. Unit directions (``along_axes``) give Jacobian
columns; random directions (``along``) give projections for the fast check; the
same code differences a gradient function for Hessian checks.

Step rule (``step_size``): h = eps**(1/3) * max(1, |x|), scipy's rule for
central differences, which balances the O(h**2) truncation error against the
O(eps/h) round-off of the difference quotient. Dense random directions through
a function with non-smooth ops (``nonsmooth``: fast mode's probes of a network
with relus) step ``dense_step_size``, eps**(1/2) * max(1, |x|) in float64: a
direction that moves every element crosses kinks at a rate proportional to
the step, and the smaller step crosses about 400 times fewer (its docstring
gives the reason in full). Along every input of a model at once
(``along_joint``), the step is taken from the largest |x| over the inputs.

Two passes, each a central difference D(s) = (f(x + s d) - f(x - s d)) / 2s:

1. D(h) for every direction (2 evaluations each). Its round-off bound is
   ROUNDOFF_ULPS * eps * max|f| / h (two values, each off by at most
   ROUNDOFF_ULPS * eps * max|f|, divided by 2h). Its truncation error,
   h**2 f'''/6, is not estimated by this pass.
2. D(2h) for the directions the caller did not settle after pass 1 (all of
   them when it gives no ``settled`` rule), combined by Richardson,
   R = (4 D(h) - D(2h)) / 3, which cancels the h**2 term. The error estimate is
   |D(h) - D(2h)| / 3 (the size of the term Richardson removed, an upper bound on
   what is left for smooth functions) plus the round-off bound
   1.5 * ROUNDOFF_ULPS * eps * max|f| / h (R weighs the four values by 4/3 and
   1/3 of their quotients' round-off: (4 * 1 + 1/2) / 3 = 1.5). eps and the
   ulps are those of the dtype the function computes in (``rule_dtype``:
   ``roundoff_ulps`` assumes fewer for 16-bit compute).

Settling rule (the caller's ``settled``; the check's is
``analyses.check._FullCheck.settled``): an element is settled after pass 1 when

    |a - D(h)| <= atol + rtol * |a| + FD_SAFETY * roundoff(D(h))

for the analytic value a. Such an element passes the two-level verdict of
``verdicts.compare`` whatever D(2h) turns out to be, because exactly
R - D(h) = (D(h) - D(2h)) / 3, so |a - R| <= |a - D(h)| + |D(h) - D(2h)| / 3,
and that second term is part of the two-level allowance (FD_SAFETY >= 1 times
the Richardson estimate). The second level therefore only runs where it can
change the verdict: a correct gradient costs 2 evaluations per element, a wrong
element 4. A settled element reports D(h) as its numeric value and pass 1's
round-off bound as its error estimate: its truncation error is not estimated,
only shown not to matter for the element's verdict. One pair-level rule could
still differ: ``inconclusive`` fires when an error estimate exceeds a tenth of
the derivatives, and a settled element has no Richardson term to contribute.
For that, D(h)'s truncation error would have to be that large and the analytic
value equal D(h) including it, wrong by exactly the truncation error; the
tests compare both verdicts on models of every kind (tests/test_speed.py).

One-sided slopes for the kink scan (``center``, unit directions only): with
f0 = f(x), pass 1 gives D+(h) = (f(x+h) - f0) / h and D-(h) = (f0 - f(x-h)) / h.
On a smooth function they differ by h * f'' (relative to the slope, a few
1e-6 in float64); at a kink by the slope gap, a sizeable fraction of the
slopes. So an element whose gap exceeds KINK_GAP times the slopes (plus
round-off) is never settled: pass 2 runs there, and the second-order one-sided
slopes right = 2 D+(h) - D+(2h), left = 2 D-(h) - D-(2h) (each f' + O(h**2))
with error |D+(h) - D+(2h)| + |D-(h) - D-(2h)| + 8 ulps eps max|f| / h go to
``diagnose``. A settled element's slopes agree by construction (both are its
D(h), error its round-off): a kink whose gap is under KINK_GAP of the slopes
is not looked for there.

How points are evaluated. Unit directions (the full check) run in place: one
traced ``tf.while_loop`` per input group sets x_i + s in a variable holding the
group, evaluates the model, sets x_i - s, evaluates, and restores x_i. The model
reads the variable without a copy, so an evaluation costs the model's own
arithmetic; building a batch of perturbed copies instead costs a copy of the
whole input per point, which made the full check's work grow as n**2 in memory
traffic (bench/README.md has the measurements). Inputs outside the group are
fixed tensors of the trace. Dense directions (fast-mode probes, a handful of
points) are batched copies under ``tf.vectorized_map``, or eager calls when
there are few enough that a trace would cost more. Every quotient is formed in
numpy from the two values (``_quotients``), however they were evaluated. A
model that cannot be traced is evaluated eagerly point by point (and a note
says so), never silently skipped.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from gradcli import progress
from gradcli.numerics.in_place import InPlaceLoop
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: Assumed round-off of one function evaluation, in units of eps * |f|.
ROUNDOFF_ULPS = 8.0
#: The same for 16-bit compute (Keras mixed precision): TensorFlow accumulates
#: float16/bfloat16 matmuls and reductions in float32 and rounds each op's
#: output once, so an evaluation is off by about one ulp of |f|; 8 ulps would
#: make every float16 difference quotient unresolvable (eps 1e-3, h 0.1).
ROUNDOFF_ULPS_16BIT = 1.0
#: An element whose first-pass one-sided slopes differ by more than this
#: fraction of their size is not settled, so the kink scan gets second-order
#: slopes there (module docstring). Smooth functions differ by h f'', about
#: 1e-5 of the slope in float64; kinks worth reporting by far more.
KINK_GAP = 1e-3


def roundoff_ulps(dtype) -> float:
    """ROUNDOFF_ULPS for the dtype a function computes in (see above)."""
    return ROUNDOFF_ULPS_16BIT if str(dtype) in ("float16", "bfloat16") else ROUNDOFF_ULPS


#: Each pass evaluates x + s*d and x - s*d; pass 2 takes s = RICHARDSON_RATIO * h.
SIGNS = (1.0, -1.0)
RICHARDSON_RATIO = 2.0
#: Every point the two passes may evaluate, in units of h (x +- h, x +- 2h).
LEVELS = (1.0, -1.0, RICHARDSON_RATIO, -RICHARDSON_RATIO)
#: Memory for one chunk of batched perturbed points (2 signs x B directions x
#: n elements), for dense directions and the eager fallback: each point is a
#: copy of the group, and a chunk that stays in cache (about 16 MB) measured
#: 2-7x faster than chunks of 256 or more directions on 2 cores.
CHUNK_BYTES = 16 * 2**20
#: Inputs are differenced together in one group, smallest first, while the
#: group stays within this many elements; larger inputs get a group of their
#: own. Rule: a group costs one trace of the model (about 0.3 s), and each of
#: its evaluations reads its inputs from a split of the group's vector, a copy
#: of the whole group (about 1.6 ns per element per direction, so a group of S
#: elements pays about 1.6 ns * S**2 over its pass): sharing pays while that
#: stays under a trace, S below about 13,000; 8,192 leaves a margin.
SHARED_GROUP_MAX = 8192
#: Directions per call of the in-place loop (``FiniteDifferences._in_place``):
#: a call costs about 0.3 ms over its evaluations (about 0.1 ms each at 43k), so
#: 512 directions make that negligible while progress is still reported (and
#: Ctrl-C is seen) every fraction of a second.
IN_PLACE_CHUNK = 512
#: Up to this many perturbed points in a call, evaluate eagerly instead of tracing.
EAGER_MAX_POINTS = 32
#: ... unless the points' copies hold more than this many elements in all
#: (6 points of a 1.7M-weight network): copying every weight per point then
#: costs more than tracing the model once, and a traced loop forms each point
#: inside the graph (``_looped``; a ResNet-50's 12 points: 9 s eagerly, 2 s looped).
#: Where the function is already traced (``FiniteDifferences.traced``) no trace
#: is left to pay, and each point is one call of that graph: a ResNet-50's
#: joint check took 18 s with its points looped and 15 s called one by one, a
#: 4.8M-weight Transformer's 9.2 s and 7.3 s (bench/layer_speed.py models).
LOOPED_MIN_ELEMENTS = 10_000_000


def chunk_size(elements: int, itemsize: int = 8) -> int:
    """Directions per chunk: as many as fit CHUNK_BYTES, at least 1, at most ``elements``."""
    fit = CHUNK_BYTES // (len(SIGNS) * itemsize * max(1, elements))
    return int(max(1, min(elements, fit)))


def step_size(scale, dtype) -> np.ndarray:
    """h = eps**(1/3) * max(1, |scale|): see the module docstring for the reason.
    ``dtype`` is the one the function computes in (``FiniteDifferences.rule_dtype``)."""
    return machine_eps(dtype) ** (1.0 / 3.0) * np.maximum(1.0, np.abs(scale))


def dense_step_size(scale, dtype) -> np.ndarray:
    """The step along a dense direction (one that moves every element at once:
    fast mode's random probes) through a function with non-smooth ops:
    eps**(1/2) * max(1, |scale|) in float64, ``step_size`` otherwise. Rule:
    such a direction moves every pre-activation behind the inputs, and the
    relus among them (about 1e5 in a ResNet-50, 3e4 in one of its activation
    layers) cross their kinks at a rate proportional to the step: at
    eps**(1/3) a few of them fall inside the stencil and bend the central
    difference beyond the tolerance. eps**(1/2) crosses about 400 times
    fewer, and in float64 its round-off, about eps**(1/2) |f| / |f'|, stays
    inside the float64 tolerance where |f'| is not far below |f| (the
    truncation error, O(h**2), vanishes). A smooth function keeps the smooth
    rule: its round-off would only weaken the check (an attention layer's
    projections, whose scale is far below |f|, turn inconclusive). In float32
    the round-off would be about 3e-4 relative: the smooth rule stays."""
    if np.dtype(str(dtype)) == np.float64:
        return np.sqrt(machine_eps(dtype)) * np.maximum(1.0, np.abs(scale))
    return step_size(scale, dtype)


def machine_eps(dtype) -> float:
    """eps of a floating dtype, bfloat16 included (numpy's finfo does not know it)."""
    if str(dtype) == "bfloat16":
        return 2.0**-7  # 8 significand bits (7 stored)
    return float(np.finfo(dtype).eps)


def coarser(a, b):
    """The dtype of ``a`` and ``b`` with the larger eps (``b`` may be None)."""
    if b is None:
        return a
    return b if machine_eps(b) > machine_eps(a) else a


@dataclass
class Derivatives:
    """Directional derivatives of every floating output along k directions.

    ``values[out]`` and ``errors[out]`` have shape ``[k, *output_shape]``;
    ``steps`` the step h used per direction; ``settled`` which directions were
    settled after the first pass (their values are D(h), see module docstring).
    """

    values: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    steps: np.ndarray
    evaluations: int
    settled: np.ndarray | None = None
    #: Unit directions with ``center`` only: one-sided slopes (module docstring).
    #: Keys "left", "right", "error" -> per output.
    one_sided: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


@dataclass
class Central:
    """One pass: D(s) per output (``[k, *output_shape]``) and max |f| over its
    two points; with a centre, also D+(s) and D-(s) (``one_sided``)."""

    values: dict[str, np.ndarray]
    largest: dict[str, np.ndarray]
    forward: dict[str, np.ndarray] = field(default_factory=dict)
    backward: dict[str, np.ndarray] = field(default_factory=dict)


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
    #: (``_eager_pairs``) call it instead of running the model eagerly, ten
    #: times cheaper for a network of small ops (a 1M-weight Transformer: 7 ms
    #: a call against 75 ms eagerly, most of it the interpreter's).
    traced: Callable[[dict], dict] | None = None
    _compiled: dict = field(default_factory=dict, repr=False)
    _seconds_per_direction: float | None = field(default=None, repr=False)  # any plain loop's

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
        self, name: str, indices: np.ndarray | None = None, settled: Callable | None = None
    ) -> Derivatives:
        """Derivatives along unit vectors e_i of input ``name`` (all i by default).

        ``settled(values, roundoff)``, if given, receives pass 1's D(h) and its
        round-off bound (dicts of ``[k, *output_shape]``) and returns which of
        the k directions need no second pass (see the module docstring)."""
        x = self.point[name]
        if indices is None:
            indices = np.arange(x.size)
        indices = np.asarray(indices, dtype=np.int64)
        flat = x.reshape(-1)
        h = step_size(flat[indices], self.rule_dtype(x.dtype))
        # Make x_i + h exactly representable, so the step taken is the step divided by.
        h = (flat[indices] + h) - flat[indices]
        return self._richardson(self.group(name), "axes", indices + self.offset(name), h, settled)

    def along(self, name: str, directions: np.ndarray, step_scale: float = 1.0) -> Derivatives:
        """Derivatives along ``directions`` (shape ``[k, *input_shape]``);
        ``step_scale`` times the step rule's step (``check._FastCheck``'s
        round-off retry, ``ROUNDOFF_RETRY``)."""
        group, embedded, h = self._embedded({name: directions}, step_scale)
        return self._richardson(group, "directions", embedded, h)

    def _embedded(self, directions: dict, step_scale: float = 1.0) -> tuple:
        """(group, embedded directions ``[k, group size]``, steps ``[k]``) for
        directions of some inputs of one group (zeros for the group's others),
        the steps by ``direction_steps``."""
        names = list(directions)
        group = self.group(names[0])
        dtype = self.point[names[0]].dtype
        rows = {n: np.asarray(directions[n], dtype=dtype).reshape(-1, self.point[n].size) for n in names}
        embedded = np.zeros((len(rows[names[0]]), sum(self.point[n].size for n in group)), dtype)
        for n, row in rows.items():
            start = self.offset(n)
            embedded[:, start : start + self.point[n].size] = row
        return group, embedded, self.direction_steps(rows, step_scale)

    def direction_steps(self, directions: dict, step_scale: float = 1.0) -> np.ndarray:
        """Steps ``[k]`` along directions of some inputs of one group (each
        ``[k, ...]``). Rule: ``step_size`` (``dense_step_size`` through
        non-smooth ops) of the largest |x| over those inputs, divided by each
        direction's largest element, times ``step_scale``."""
        names = list(directions)
        dtype = self.point[names[0]].dtype
        rows = [np.asarray(directions[n]).reshape(len(directions[n]), -1) for n in names]
        longest = np.max([np.abs(r).max(axis=1, initial=0.0) for r in rows], axis=0).astype(dtype)
        longest = np.where(longest > 0, longest, 1.0)
        largest = max(np.abs(self.point[n]).max(initial=0.0) for n in names)
        rule = dense_step_size if self.nonsmooth else step_size
        return step_scale * rule(largest, self.rule_dtype(dtype)) / longest

    def anew(self, **changes) -> "FiniteDifferences":
        """The same rules (step, precision, non-smooth flag, XLA policy) for
        another point or function (``changes``: the fields that differ), with
        nothing of this one's carried over: no traces, no timings, no
        evaluations counted (the caller adds them to its own count). A traced
        function (``traced``) stays only for the same function at a point of
        the same shapes: it is that function's graph at those shapes."""
        point = changes.get("point", {})
        if "function" in changes or any(np.shape(v) != np.shape(self.point.get(n)) for n, v in point.items()):
            changes.setdefault("traced", None)
        return dataclasses.replace(self, evaluations=0, _compiled={}, _seconds_per_direction=None, **changes)

    def joint_group(self, names) -> bool:
        """Whether ``names`` are one group (``along_joint`` can move them at once)."""
        names = list(names)
        return bool(names) and set(self.group(names[0])) == set(names)

    def along_joint(self, directions: dict) -> Derivatives | None:
        """Derivatives along directions that move every input of ``directions``
        (each ``[k, *input_shape]``) at once: one set of evaluations for the
        whole model instead of one per input. None when the inputs are not one
        group (``group``: ``joint`` and one dtype); the caller goes input by input.

        Step rule: as ``along`` takes it for one input, from the largest |x|
        over the inputs."""
        planned = self.joint_steps(directions)
        if planned is None:
            return None
        group, embedded, h = planned
        return self._richardson(group, "directions", embedded, h)

    def joint_steps(self, directions: dict) -> tuple | None:
        """``_embedded`` for directions of every input of one group (``along_joint``'s
        rule), or None when the inputs are not one group."""
        if not self.joint_group(directions):
            return None
        return self._embedded(directions)

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
            up, down = self._evaluate_pairs(group, "directions", embedded, row)
            ups.append(up)
            downs.append(down)
            self.evaluations += 2 * len(row)
        join = lambda parts: {o: np.concatenate([np.asarray(p[o]) for p in parts]) for o in parts[0]}  # noqa: E731
        return join(ups), join(downs)

    def _point_pairs(self, directions: dict, steps) -> tuple[dict, dict]:
        """``joint_pairs`` for directions of inputs of several groups: each
        point x + s d_j (every moved input at once, the others as they are) is
        one call (``_eager_sides``); the outputs in the first moved input's
        dtype."""
        steps = np.asarray(steps)
        k = steps.shape[1]

        def moved(j, sign):  # level-major, as joint_pairs orders its points
            step = steps[j // k, j % k]
            return {n: tf.constant(self.point[n] + np.asarray(d[j % k], self.point[n].dtype)
                                   * self.point[n].dtype.type(sign * step))
                    for n, d in directions.items()}

        self.evaluations += 2 * steps.size
        return self._eager_sides(moved, steps.size, self.point[next(iter(directions))].dtype)

    def one_batch_per_group(self, names) -> bool:
        """Whether the first pass along every axis of ``names`` is one chunk per group."""
        groups = list(dict.fromkeys(self.group(n) for n in names))
        return all(
            sum(self.point[n].size for n in g) <= self._chunk_length(g, "axes") for g in groups
        )

    def predict_axes_seconds(self, names: list[str]) -> float | None:
        """Predicted seconds of the first pass along every axis of ``names``, or
        None when every group's first pass is a single chunk (timing it would cost
        as much as running it).

        Rule: per group, one chunk runs once untimed (tracing, and XLA compiling,
        are paid here and reused by the check) and once timed; the prediction is
        that time multiplied by the group's number of chunks. The evaluations
        count towards ``evaluations``: they are spent."""
        if self.one_batch_per_group(names):
            return None
        groups = list(dict.fromkeys(self.group(n) for n in names))
        sizes = [sum(self.point[n].size for n in g) for g in groups]
        chunks = [self._chunk_length(g, "axes") for g in groups]
        seconds = 0.0
        for group, elements, chunk in zip(groups, sizes, chunks):
            name = group[0]
            flat = self.point[name].reshape(-1)
            first = np.arange(min(chunk, self.point[name].size))
            h = (flat[first] + step_size(flat[first], self.rule_dtype(flat.dtype))) - flat[first]
            part = first + self.offset(name)
            self._chunk(group, "axes", part, h)  # trace (and compile) untimed
            started = time.perf_counter()
            self._chunk(group, "axes", part, h)
            seconds += (time.perf_counter() - started) / len(h) * elements
            self.evaluations += 2 * len(SIGNS) * len(h)
        return seconds

    def evaluate(self, name: str, points: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs at each of ``points`` (shape ``[k, *input_shape]``) for input
        ``name``, other inputs at the point: the same batched (or eager fallback)
        evaluation the differences use, for callers that form their own quotients
        (one-sided ladders, Taylor remainders)."""
        points = np.asarray(points, dtype=self.point[name].dtype).reshape(len(points), -1)
        evaluate = self._group_evaluator((name,))
        build = lambda vectorized: lambda rows: _map(evaluate, rows, self.outputs, vectorized)  # noqa: E731
        result = self._call((name, "points"), build, tf.constant(points))
        self.evaluations += len(points)
        return {o: np.asarray(v) for o, v in result.items()}

    def axis_pairs(self, name: str, indices, steps) -> tuple[dict, dict]:
        """f(x + s_k e_i_k) and f(x - s_k e_i_k) per output (``[k, *output_shape]``)
        for flat element ``indices`` of input ``name`` and their ``steps``, other
        inputs at the point: the evaluation ``along_axes`` uses (in place, no
        copy of x per point), for callers that form their own quotients
        (``verdicts.diagnose``'s one-sided ladders)."""
        group = self.group(name)
        part = np.asarray(indices, dtype=np.int64) + self.offset(name)
        steps = np.asarray(steps, dtype=self.point[name].dtype)
        up, down = self._evaluate_pairs(group, "axes", part, steps)
        self.evaluations += 2 * len(steps)
        return up, down

    def _call(self, key, build, *args, eager: bool = False):
        """``build(vectorized)(*args)``: traced and vectorised (cached by ``key``,
        XLA when ``jit_compile``), or eagerly point by point when asked (small batches)
        or when the model cannot be traced or vectorised (then ``self.eager``
        stays set, and the check says so). The leading (batch) dimension is left
        open in the trace, so a second pass or a last chunk of another length
        reuses it (XLA still compiles once per length)."""
        if not (eager or self.eager):
            if key not in self._compiled:
                self._compiled[key] = tf.function(
                    build(vectorized=True), jit_compile=self.jit_compile or None, autograph=False,
                    input_signature=[tf.TensorSpec([None, *a.shape[1:]], a.dtype) for a in args],
                )
            try:
                return self._compiled[key](*args)
            except Exception:  # not traceable or not vectorizable: run eagerly
                self.eager = True
        return build(vectorized=False)(*args)

    # -- one batched mechanism for both kinds of direction ---------------------

    def _richardson(self, group, kind, batch, h, settled=None) -> Derivatives:
        """Pass 1 everywhere, pass 2 where ``settled`` does not say otherwise."""
        k = len(h)
        rule = self.rule_dtype(self.point[group[0]].dtype)
        eps, ulps = machine_eps(rule), roundoff_ulps(rule)
        first = self._central(group, kind, batch, h)
        values = {o: v.copy() for o, v in first.values.items()}
        errors = {
            o: ulps * eps * first.largest[o] / _along(h, v) for o, v in values.items()
        }
        done = np.zeros(k, bool) if settled is None else np.asarray(settled(values, errors), bool)
        sides = bool(first.forward)
        if sides:
            done &= ~self._kink_gaps(first, errors)
        todo = np.flatnonzero(~done)
        one_sided = {}
        if sides:  # settled elements: both slopes are D(h) (module docstring)
            one_sided = {
                "left": {o: v.copy() for o, v in values.items()},
                "right": {o: v.copy() for o, v in values.items()},
                "error": {o: e.copy() for o, e in errors.items()},
            }
        if len(todo):
            second = self._central(
                group, kind, batch[todo], RICHARDSON_RATIO * h[todo],
                stage="finite differences, second level",
            )
            for o in self.outputs:
                d1, d2 = first.values[o][todo], second.values[o]
                largest = np.maximum(first.largest[o][todo], second.largest[o])
                step = _along(h[todo], d1)
                values[o][todo] = (4.0 * d1 - d2) / 3.0
                errors[o][todo] = np.abs(d1 - d2) / 3.0 + 1.5 * ulps * eps * largest / step
                if sides:
                    p1, p2 = first.forward[o][todo], second.forward[o]
                    m1, m2 = first.backward[o][todo], second.backward[o]
                    one_sided["right"][o][todo] = 2.0 * p1 - p2
                    one_sided["left"][o][todo] = 2.0 * m1 - m2
                    one_sided["error"][o][todo] = (
                        np.abs(p1 - p2) + np.abs(m1 - m2) + 8.0 * ulps * eps * largest / step
                    )
        return Derivatives(
            values=values, errors=errors, steps=h,
            evaluations=len(SIGNS) * (k + len(todo)),
            settled=None if settled is None else done,
            one_sided=one_sided,
        )

    def _kink_gaps(self, first: Central, roundoff: dict) -> np.ndarray:
        """Directions whose first-pass one-sided slopes differ by more than
        KINK_GAP of their size plus round-off: kink suspects, never settled."""
        gap = np.zeros(len(next(iter(first.values.values()))), bool)
        for o in self.outputs:
            p, m = first.forward[o], first.backward[o]
            far = np.abs(p - m) > KINK_GAP * (np.abs(p) + np.abs(m)) + 4.0 * roundoff[o]
            gap |= far.reshape(len(gap), -1).any(axis=1)
        return gap

    def _central(self, group, kind, batch, h, stage: str = "finite differences") -> Central:
        """D(h) along every row of ``batch``, in chunks of a fixed shape (one trace)."""
        k = len(h)
        chunk = self._chunk_length(group, kind)
        values: dict[str, list] = {o: [] for o in self.outputs}
        largest: dict[str, list] = {o: [] for o in self.outputs}
        forward: dict[str, list] = {o: [] for o in self.outputs}
        backward: dict[str, list] = {o: [] for o in self.outputs}
        detail = _progress_detail(", ".join(group), kind, [self.group(n) for n in self.wrt], group)
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
            d, fmax, sides = self._chunk(group, kind, part, steps, remaining=max(0, k - start - chunk))
            keep = len(steps) - pad
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

    def _chunk_length(self, group, kind) -> int:
        """Directions per chunk: ``chunk`` if set; in place, IN_PLACE_CHUNK (no
        copies: the chunk only sets how often progress is reported); dense
        directions of a large group, formed inside a traced loop (``_looped``):
        IN_PLACE_CHUNK too; batched copies, as many as fit CHUNK_BYTES
        (``chunk_size``)."""
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
        return self.traced is None and directions * len(SIGNS) * elements > LOOPED_MIN_ELEMENTS

    def _chunk(self, group, kind, part, steps, remaining: int = 0):
        """D(s) along each row of one chunk, its max |f|, and (axes with a
        centre) the one-sided quotients: evaluate f(x + s d) and f(x - s d),
        then form every quotient in numpy (``_quotients``), whichever way the
        points were evaluated."""
        up, down = self._evaluate_pairs(group, kind, part, steps, remaining)
        return _quotients(up, down, steps, self._center(group) if kind == "axes" else None)

    def _evaluate_pairs(self, group, kind, part, steps, remaining: int = 0):
        """f(x + s d) and f(x - s d) per output ([k, *output_shape] each).

        Unit directions run in place (``_in_place``): one traced loop sets one
        element of a variable, evaluates, and restores it, so no point is ever
        copied. Dense directions (fast-mode probes) are batched copies
        (``_differences``). A handful of points (fast-mode probes) costs less
        run eagerly than one trace of the model (about 0.3 s), or through the
        function's own trace when it has one (``traced``)."""
        eager = len(steps) * len(SIGNS) <= EAGER_MAX_POINTS
        if kind == "axes" and not (eager or self.eager):
            try:
                return self._in_place(group, part, steps, remaining)
            except Exception:  # not traceable in a loop: run eagerly, point by point
                self.eager = True
        elements = sum(self.point[n].size for n in group)
        if kind == "directions" and not self.eager and self._loops(len(steps), elements):
            try:
                values = self._call((group, "directions looped"), lambda vectorized: self._looped(group),
                                    tf.constant(part), tf.constant(steps))
                k = len(steps)
                values = {o: np.asarray(v) for o, v in values.items()}
                return {o: v[:k] for o, v in values.items()}, {o: v[k:] for o, v in values.items()}
            except Exception:  # not traceable in a loop: the eager points below
                self.eager = True
        if eager or self.eager:
            return self._eager_pairs(group, kind, part, steps)
        values = self._call(
            (group, kind), self._differences(group, kind), tf.constant(part), tf.constant(steps),
        )
        k = len(steps)
        values = {o: np.asarray(v) for o, v in values.items()}
        return {o: v[:k] for o, v in values.items()}, {o: v[k:] for o, v in values.items()}

    def _eager_pairs(self, group, kind, part, steps):
        """The points one by one, eagerly (``_eager_sides``), each input the
        direction does not move passed as it is (an eager split of the whole
        group cost as much as the model). A unit direction sets x_i + s h in a
        copy of its input, as the in-place loop does; a dense one is
        x + d * (s h), as the batched copies compute it: the same points
        either way."""
        dtype = self.point[group[0]].dtype
        spans = {n: (self.offset(n), self.offset(n) + self.point[n].size) for n in group}

        def point(name, row, step):
            x = self.point[name].reshape(-1)
            start, _ = spans[name]
            if kind == "axes":
                moved = x.copy()
                moved[row - start] = x[row - start] + step
            else:
                moved = x + row[start : start + x.size] * step
            return tf.constant(moved.reshape(self.point[name].shape))

        def moved(j, sign):
            row, signed = part[j], dtype.type(sign * steps[j])
            if kind == "axes":
                names = [n for n, (start, stop) in spans.items() if start <= row < stop]
            else:
                names = [n for n, (start, stop) in spans.items() if np.any(row[start:stop])]
            return {n: point(n, row, signed) for n in names}

        return self._eager_sides(moved, len(steps), dtype)

    def _eager_sides(self, moved, count: int, dtype) -> tuple[dict, dict]:
        """f at the +s and -s sides of ``count`` points, one call each, through
        ``traced`` when there is one, else the model's Python eagerly:
        ``moved(j, sign)`` gives point j's moved inputs, every other input is
        passed as it is. Per side, output -> ``[count, *output_shape]`` in
        ``dtype``."""
        if "eager inputs" not in self._compiled:
            self._compiled["eager inputs"] = {n: tf.constant(v) for n, v in self.point.items()}
        fixed = self._compiled["eager inputs"]
        evaluate = self.traced or self.function
        sides: tuple[dict, dict] = ({o: [] for o in self.outputs}, {o: [] for o in self.outputs})
        for j in range(count):
            for sign, values in zip(SIGNS, sides):
                result = evaluate({**fixed, **moved(j, sign)})
                for o in self.outputs:
                    values[o].append(np.asarray(tf.cast(result[o], dtype)))
        return tuple({o: np.stack(v) for o, v in side.items()} for side in sides)

    def _center(self, group):
        """f(x) per output in the group's dtype, when known (``center``)."""
        if self.center is None:
            return None
        dtype = self.point[group[0]].dtype
        return {o: np.asarray(self.center[o]).astype(dtype) for o in self.outputs}

    def _in_place(self, group, part, steps, remaining: int = 0):
        """f(x + s e_i), f(x - s e_i) for the group-flat indices ``part``, without
        copying the group (``numerics.in_place``); ``remaining`` directions are
        still to come (they decide whether XLA pays)."""
        key = (group, "in place")
        if key not in self._compiled:
            shapes = {o: tf.TensorShape(np.shape(self.center[o])) for o in self.outputs} if self.center else {}
            self._compiled[key] = InPlaceLoop(
                self._group_evaluator(group), self._flat(group), self.outputs, shapes,
                self.jit_compile, self._chunk_length(group, "axes"),
            )
        loop = self._compiled[key]
        result = loop(part, steps, remaining, measured=self._seconds_per_direction)
        self._seconds_per_direction = loop.seconds_per_direction or self._seconds_per_direction
        return result

    def _flat(self, group) -> np.ndarray:
        return np.concatenate([self.point[n].reshape(-1) for n in group])

    def _group_evaluator(self, group):
        """The model as a function of the group's flat vector (other inputs fixed),
        outputs cast to the group's dtype."""
        others = {n: tf.constant(v) for n, v in self.point.items() if n not in group}
        shapes = [tuple(self.point[n].shape) for n in group]
        sizes = [int(self.point[n].size) for n in group]
        dtype = tf.as_dtype(self.point[group[0]].dtype)
        outputs = self.outputs

        def evaluate(flat):
            parts = tf.split(flat, sizes) if len(sizes) > 1 else [flat]
            values = {n: tf.reshape(p, s) for n, p, s in zip(group, parts, shapes)}
            result = self.function({**others, **values})
            return {o: tf.cast(result[o], dtype) for o in outputs}

        return evaluate

    def _looped(self, group):
        """f(x + s_j d_j) for each sign s (all + rows, then all - rows) in one
        traced loop that forms each point inside the loop: for a large network
        along dense directions, where a batch of copies (or eager points, each
        a copy of every weight) costs more than one trace of the model."""
        evaluate = self._group_evaluator(group)
        x = tf.constant(self._flat(group))
        dtype = x.dtype
        shapes = {o: tf.TensorShape(np.shape(self.center[o])) if self.center else tf.TensorShape(None)
                  for o in self.outputs}

        def run(part, steps):
            signed = tf.concat([sign * steps for sign in SIGNS], axis=0)
            rows = tf.tile(tf.range(tf.shape(steps)[0]), [len(SIGNS)])
            return tf.map_fn(
                lambda i: evaluate(x + tf.gather(part, rows[i]) * signed[i]),
                tf.range(tf.shape(signed)[0]),
                fn_output_signature={o: tf.TensorSpec(shapes[o], dtype) for o in self.outputs},
            )

        return run

    def _differences(self, group, kind):
        """Batched evaluation of x + s_j d_j for each sign s (all + rows, then all -
        rows): copies of the group, vectorised, or eagerly one by one."""
        evaluate = self._group_evaluator(group)
        x = tf.constant(self._flat(group))
        outputs = self.outputs

        def perturbed(part, steps):
            signed = tf.concat([sign * steps for sign in SIGNS], axis=0)
            if kind == "directions":
                return x + tf.tile(part, [len(SIGNS), 1]) * signed[:, None]
            rows = tf.shape(signed, out_type=tf.int64)[0]
            where = tf.stack([tf.range(rows), tf.tile(part, [len(SIGNS)])], axis=1)
            # x + (a sparse matrix of the steps): one broadcast add writes each point once.
            return x[None] + tf.scatter_nd(where, signed, tf.stack([rows, tf.size(x, tf.int64)]))

        return lambda vectorized: lambda part, steps: _map(
            evaluate, perturbed(part, steps), outputs, vectorized
        )


def _quotients(up: dict, down: dict, steps: np.ndarray, center: dict | None):
    """D(s) = (f(x + s d) - f(x - s d)) / 2s and max |f| over the points, per
    output; with the centre f0 also D+(s) = (f(x + s d) - f0) / s and
    D-(s) = (f0 - f(x - s d)) / s (the kink scan's one-sided slopes)."""
    quotients, largest = {}, {}
    sides = {"forward": {}, "backward": {}} if center is not None else {}
    for o, f_up in up.items():
        f_down = down[o]
        s = _along(steps, f_up)
        quotients[o] = (f_up - f_down) / (2.0 * s)
        largest[o] = np.maximum(np.abs(f_up), np.abs(f_down))
        if center is not None:
            f0 = center[o][None]
            sides["forward"][o] = (f_up - f0) / s
            sides["backward"][o] = (f0 - f_down) / s
            largest[o] = np.maximum(largest[o], np.abs(f0))
    return quotients, largest, sides


def _along(h: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``h`` ([k]) shaped to broadcast against ``like`` ([k, *output_shape])."""
    return h.reshape((-1,) + (1,) * (like.ndim - 1))


def _map(evaluate, points, outputs, vectorized: bool) -> dict:
    """``evaluate`` at every row of ``points``: vectorised (pfor) or one by one."""
    if vectorized:
        return tf.vectorized_map(evaluate, points)
    rows = [evaluate(points[i]) for i in range(points.shape[0])]
    return {o: tf.stack([r[o] for r in rows]) for o in outputs}


def _progress_detail(names: str, kind: str, groups: list, group) -> str:
    """What a progress row says of a pass: the inputs, which of the inputs
    (``input 3 of 6`` when there are several groups) and the kind of
    directions (``axes``: every element, a full check; else random probes)."""
    distinct = list(dict.fromkeys(groups))
    where = f", input {distinct.index(group) + 1} of {len(distinct)}" if len(distinct) > 1 and group in distinct else ""
    return f"{names}{where} ({'every element' if kind == 'axes' else 'random probes'})"
