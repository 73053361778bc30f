"""Numeric derivatives: central differences with one Richardson step, batched.

One mechanism serves every numeric derivative gradcli takes: the derivative of
``function`` (a dict of tensors -> dict of output tensors) at ``point`` along a
batch of directions in one input. Unit directions (``along_axes``) give Jacobian
columns; random directions (``along``) give projections for the fast check; the
same code differences a gradient function for Hessian checks.

Step rule (``step_size``): h = eps**(1/3) * max(1, |x|), scipy's rule for
central differences, which balances the O(h**2) truncation error against the
O(eps/h) round-off of the difference quotient. Each direction is evaluated at
x +- h*d and x +- 2h*d and the two quotients are combined by Richardson,
R = (4 D(h) - D(2h)) / 3, which cancels the h**2 term. The error estimate is
|D(h) - D(2h)| / 3 (the size of the term Richardson removed, an upper bound on
what is left for smooth functions) plus the round-off bound
1.5 * ROUNDOFF_ULPS * eps * max|f| / h (``roundoff_ulps``: fewer for 16-bit compute).

All perturbed points of a chunk are evaluated in one ``tf.function`` call with
``tf.vectorized_map``; inputs other than the perturbed one stay unbatched. A
model that cannot be traced is evaluated eagerly point by point (and a note
says so), never silently skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from gradcli import progress
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: Assumed round-off of one function evaluation, in units of eps * |f|.
ROUNDOFF_ULPS = 8.0
#: The same for 16-bit compute (Keras mixed precision): TensorFlow accumulates
#: float16/bfloat16 matmuls and reductions in float32 and rounds each op's
#: output once, so an evaluation is off by about one ulp of |f|; 8 ulps would
#: make every float16 difference quotient unresolvable (eps 1e-3, h 0.1).
ROUNDOFF_ULPS_16BIT = 1.0


def roundoff_ulps(dtype) -> float:
    """ROUNDOFF_ULPS for the dtype a function computes in (see above)."""
    return ROUNDOFF_ULPS_16BIT if str(dtype) in ("float16", "bfloat16") else ROUNDOFF_ULPS
#: Steps of the two levels, in units of h: central differences at +-1 and +-2.
LEVELS = (1.0, -1.0, 2.0, -2.0)
#: Memory for one chunk's perturbed points (4 levels x B directions x n elements).
#: Each evaluation copies the whole perturbed group, so the work is n**2 per
#: group and bound by memory traffic: a chunk that stays in cache (about 16 MB)
#: measured 2-7x faster than chunks of 256 or more directions on 2 cores.
CHUNK_BYTES = 16 * 2**20
#: XLA compiles a chunk in 1.5-5 s and then runs it 1.3-1.6x faster; it pays off
#: once a group has this many elements (measured at 1k, 10k and 43k parameters).
XLA_MIN_ELEMENTS = 4096


#: Up to this many perturbed points in a call, evaluate eagerly instead of tracing.
EAGER_MAX_POINTS = 32


def chunk_size(elements: int, itemsize: int = 8) -> int:
    """Directions per chunk: as many as fit CHUNK_BYTES, at least 1, at most ``elements``."""
    fit = CHUNK_BYTES // (len(LEVELS) * itemsize * max(1, elements))
    return int(max(1, min(elements, fit)))


def step_size(scale, dtype) -> np.ndarray:
    """h = eps**(1/3) * max(1, |scale|): see the module docstring for the reason.
    ``dtype`` is the one the function computes in (``FiniteDifferences.rule_dtype``)."""
    return machine_eps(dtype) ** (1.0 / 3.0) * np.maximum(1.0, np.abs(scale))


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
    ``steps`` the step h used per direction.
    """

    values: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    steps: np.ndarray
    evaluations: int
    #: Unit directions only (``along_axes``): one-sided slopes from the same
    #: evaluations, see ``one_sided``. Keys "left", "right", "error" -> per output.
    one_sided: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


@dataclass
class FiniteDifferences:
    """Numeric derivatives of ``function`` at ``point`` (see module docstring).

    Inputs are perturbed through one flat vector per *group*: with
    ``joint=True`` all of ``wrt`` form one group (one trace serves every input:
    tracing and vectorising a model costs about 0.3 s, which dominates small
    checks); otherwise each input is its own group, and the other inputs stay
    unbatched inside ``vectorized_map``, so a batch copies only the perturbed
    tensor (what matters for large inputs, where copies dominate).
    """

    function: Callable[[dict], dict]
    point: dict[str, np.ndarray]
    outputs: list[str]
    wrt: list[str] = field(default_factory=list)
    joint: bool = False
    chunk: int | None = None  # directions per chunk; None: ``chunk_size`` of the group
    jit_compile: bool | None = None  # None: XLA for groups of XLA_MIN_ELEMENTS or more
    evaluations: int = 0
    eager: bool = False  # set when tracing failed and points run one by one
    #: The lowest precision the function computes in (``ModelGraph.precision``,
    #: e.g. float32 inside a model fed float64): steps and round-off bounds follow
    #: its eps, since a step below its resolution is lost inside the function.
    precision: str | None = None
    #: The outputs at the point, if known: ``along_axes`` then also returns
    #: one-sided slopes (``one_sided``) at no extra evaluation.
    center: dict | None = None
    _compiled: dict = field(default_factory=dict, repr=False)

    def rule_dtype(self, dtype):
        """The dtype whose eps rules steps and round-off: the point's, or the
        coarser compute precision."""
        return coarser(dtype, self.precision)

    def use_xla(self, elements: int) -> bool | None:
        if self.jit_compile is None:
            return True if elements >= XLA_MIN_ELEMENTS else None
        return self.jit_compile or None

    def group(self, name: str) -> tuple[str, ...]:
        return tuple(self.wrt) if self.joint and name in self.wrt else (name,)

    def offset(self, name: str) -> int:
        group = self.group(name)
        return sum(self.point[n].size for n in group[: group.index(name)])

    def along_axes(self, name: str, indices: np.ndarray | None = None) -> Derivatives:
        """Derivatives along unit vectors e_i of input ``name`` (all i by default)."""
        x = self.point[name]
        if indices is None:
            indices = np.arange(x.size)
        indices = np.asarray(indices, dtype=np.int64)
        flat = x.reshape(-1)
        h = step_size(flat[indices], self.rule_dtype(x.dtype))
        # Make x_i + h exactly representable, so the step taken is the step divided by.
        h = (flat[indices] + h) - flat[indices]
        return self._run(self.group(name), "axes", indices + self.offset(name), h)

    def along(self, name: str, directions: np.ndarray) -> Derivatives:
        """Derivatives along ``directions`` (shape ``[k, *input_shape]``)."""
        x = self.point[name]
        directions = np.asarray(directions, dtype=x.dtype).reshape(-1, x.size)
        longest = np.abs(directions).max(axis=1)
        longest = np.where(longest > 0, longest, 1.0)
        h = step_size(np.abs(x).max(initial=0.0), self.rule_dtype(x.dtype)) / longest
        group = self.group(name)
        embedded = np.zeros((len(directions), sum(self.point[n].size for n in group)), x.dtype)
        start = self.offset(name)
        embedded[:, start : start + x.size] = directions
        return self._run(group, "directions", embedded, h)

    def evaluate(self, name: str, points: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs at each of ``points`` (shape ``[k, *input_shape]``) for input
        ``name``, other inputs at the point: the same batched (or eager fallback)
        evaluation the differences use, for callers that form their own quotients
        (one-sided ladders, Taylor remainders)."""
        points = np.asarray(points, dtype=self.point[name].dtype)
        result = self._call(
            (name, "points", points.shape), self._evaluator(name),
            self.point[name].size, tf.constant(points),
        )
        self.evaluations += len(points)
        return {o: np.asarray(v) for o, v in result.items()}

    def _evaluator(self, name):
        others = {n: tf.constant(v) for n, v in self.point.items() if n != name}
        dtype = tf.as_dtype(self.point[name].dtype)
        outputs = self.outputs

        def evaluate(xi):
            result = self.function({**others, name: xi})
            return {o: tf.cast(result[o], dtype) for o in outputs}

        def build(vectorized: bool):
            return lambda points: _map(evaluate, points, outputs, vectorized)

        return build

    def _call(self, key, build, elements: int, *args, eager: bool = False):
        """``build(vectorized)(*args)``: traced and vectorised (cached by ``key``,
        XLA by ``use_xla``), or eagerly point by point when asked (small batches)
        or when the model cannot be traced or vectorised (then ``self.eager``
        stays set, and the check says so)."""
        if not (eager or self.eager):
            if key not in self._compiled:
                self._compiled[key] = tf.function(
                    build(vectorized=True), jit_compile=self.use_xla(elements), autograph=False
                )
            try:
                return self._compiled[key](*args)
            except Exception:  # not traceable or not vectorizable: run eagerly
                self.eager = True
        return build(vectorized=False)(*args)

    # -- one batched mechanism for both kinds of direction ---------------------

    def _run(self, group, kind, batch, h) -> Derivatives:
        k = len(h)
        elements = sum(self.point[n].size for n in group)
        chunk = self.chunk or chunk_size(elements, self.point[group[0]].dtype.itemsize)
        values: dict[str, list] = {o: [] for o in self.outputs}
        errors: dict[str, list] = {o: [] for o in self.outputs}
        detail = ", ".join(group)
        progress.report("finite differences", 0, k, detail)
        sides: dict[str, dict[str, list]] = {k: {o: [] for o in self.outputs} for k in ONE_SIDED}
        for start in range(0, k, chunk):
            part = batch[start : start + chunk]
            steps = h[start : start + chunk]
            pad = chunk - len(steps) if k > chunk else 0
            if pad:  # a fixed chunk shape keeps one trace for every chunk
                part = np.concatenate([part, np.repeat(part[-1:], pad, axis=0)])
                steps = np.concatenate([steps, np.repeat(steps[-1:], pad)])
            est, err, side = self._chunk(group, kind, part, steps)
            for o in self.outputs:
                values[o].append(np.asarray(est[o])[: len(steps) - pad])
                errors[o].append(np.asarray(err[o])[: len(steps) - pad])
                for key in side:
                    sides[key][o].append(np.asarray(side[key][o])[: len(steps) - pad])
            self.evaluations += len(LEVELS) * (len(steps) - pad)
            progress.report("finite differences", min(start + chunk, k), k, detail)
        return Derivatives(
            values={o: np.concatenate(v) for o, v in values.items()},
            errors={o: np.concatenate(e) for o, e in errors.items()},
            steps=h,
            evaluations=len(LEVELS) * k,
            one_sided={
                key: {o: np.concatenate(v) for o, v in by_output.items()}
                for key, by_output in sides.items() if all(by_output.values())
            },
        )

    def _chunk(self, group, kind, part, steps):
        # A handful of points (fast-mode probes) costs less run eagerly than one
        # trace and vectorisation of the model (about 0.3 s).
        return self._call(
            (group, kind, part.shape), self._differences(group, kind),
            sum(self.point[n].size for n in group), tf.constant(part), tf.constant(steps),
            eager=len(steps) * len(LEVELS) <= EAGER_MAX_POINTS,
        )

    def _differences(self, group, kind):
        dtype = self.point[group[0]].dtype
        others = {n: tf.constant(v) for n, v in self.point.items() if n not in group}
        shapes = [tuple(self.point[n].shape) for n in group]
        sizes = [int(self.point[n].size) for n in group]
        x = tf.constant(np.concatenate([self.point[n].reshape(-1) for n in group]))
        total = sum(sizes)
        outputs = self.outputs
        eps = machine_eps(self.rule_dtype(dtype))
        ulps = roundoff_ulps(self.rule_dtype(dtype))
        center = None
        if kind == "axes" and self.center is not None:
            center = {o: tf.constant(np.asarray(self.center[o], dtype)) for o in outputs}

        def evaluate(flat):
            parts = tf.split(flat, sizes) if len(sizes) > 1 else [flat]
            values = {n: tf.reshape(p, s) for n, p, s in zip(group, parts, shapes)}
            result = self.function({**others, **values})
            return {o: tf.cast(result[o], x.dtype) for o in outputs}

        def run(part, steps, vectorized):
            directions = tf.one_hot(part, total, dtype=x.dtype) if kind == "axes" else part
            k = tf.shape(steps)[0]
            scaled = directions * steps[:, None]
            points = tf.concat([x + level * scaled for level in LEVELS], axis=0)
            values = _map(evaluate, points, outputs, vectorized)
            estimates, error_bounds = {}, {}
            sides = {key: {} for key in ONE_SIDED} if center is not None else {}
            for o in outputs:
                f = tf.reshape(values[o], tf.concat([[len(LEVELS), k], tf.shape(values[o])[1:]], 0))
                hb = tf.reshape(steps, tf.concat([[k], tf.ones([tf.rank(f) - 2], tf.int32)], 0))
                d1 = (f[0] - f[1]) / (2.0 * hb)
                d2 = (f[2] - f[3]) / (4.0 * hb)
                estimates[o] = (4.0 * d1 - d2) / 3.0
                fmax = tf.reduce_max(tf.abs(f), axis=0)
                error_bounds[o] = tf.abs(d1 - d2) / 3.0 + 1.5 * ulps * eps * fmax / hb
                if center is not None:
                    one_sided(sides, o, f, center[o], hb, fmax, eps, ulps)
            return estimates, error_bounds, sides

        return lambda vectorized: lambda part, steps: run(part, steps, vectorized)


#: The one-sided slopes ``along_axes`` returns beside the central differences.
ONE_SIDED = ("left", "right", "error")


def one_sided(sides, o, f, f0, hb, fmax, eps, ulps=ROUNDOFF_ULPS) -> None:
    """One-sided slopes from the evaluations at x +- h, x +- 2h and f0 = f(x):
    right = 2 D+(h) - D+(2h) = (4 f(x+h) - f(x+2h) - 3 f0) / 2h, left likewise.
    On a smooth function both are f' - h**2 f3 / 3 + O(h**3) (f3 the third
    derivative), so they differ by O(h**3); at a kink by the slope gap. Error:
    |D+(h) - D+(2h)| + |D-(h) - D-(2h)| (the removed first-order terms) plus the
    round-off of both, 2 * 4 * ulps * eps * max|f| / h (``roundoff_ulps`` of the
    compute dtype). ``diagnose``
    looks for kinks on every element with them, at no extra evaluation (f0 is
    ``FiniteDifferences.center``, the outputs the model gave at the point)."""
    f0 = tf.cast(f0, f.dtype)[None]
    dp1, dp2 = (f[0] - f0) / hb, (f[2] - f0) / (2.0 * hb)
    dm1, dm2 = (f0 - f[1]) / hb, (f0 - f[3]) / (2.0 * hb)
    sides["right"][o] = 2.0 * dp1 - dp2
    sides["left"][o] = 2.0 * dm1 - dm2
    fmax = tf.maximum(fmax, tf.abs(f0))
    sides["error"][o] = tf.abs(dp1 - dp2) + tf.abs(dm1 - dm2) + 8.0 * ulps * eps * fmax / hb


def _map(evaluate, points, outputs, vectorized: bool) -> dict:
    """``evaluate`` at every row of ``points``: vectorised (pfor) or one by one."""
    if vectorized:
        return tf.vectorized_map(evaluate, points)
    rows = [evaluate(points[i]) for i in range(points.shape[0])]
    return {o: tf.stack([r[o] for r in rows]) for o in outputs}
