"""Evaluators: who computes f at the points of a finite difference.

``FiniteDifferences`` (``numerics.finite_diff``) decides the directions, steps
and passes (``numerics.difference_rule``) and asks one evaluator, through the
public protocol ``PairEvaluator.evaluate_pairs``, for f(x + s d) and
f(x - s d); it forms every quotient itself, so an evaluator changes how the
values are computed, never which points or which numbers. ``ModelEvaluator``
is the default (the model itself); a caller that evaluates the points
elsewhere (``analyses.layers``'s one traced call per unit) supplies its own.

How ``ModelEvaluator`` evaluates points. Unit directions (the full check) run
in place: one traced ``tf.while_loop`` per input group sets x_i + s (then
x_i - s) in a variable holding the group, evaluates the model, and restores
x_i, one point an iteration (one call of the model in the loop's body). The model
reads the variable without a copy, so an evaluation costs the model's own
arithmetic; building a batch of perturbed copies instead costs a copy of the
whole input per point, which made the full check's work grow as n**2 in memory
traffic (bench/README.md has the measurements). Inputs outside the group are
fixed tensors of the trace. Dense directions (fast-mode probes, a handful of
points) are batched copies under ``tf.vectorized_map``, or eager calls when
there are few enough that a trace would cost more. Every quotient is formed in
numpy from the two values (``difference_rule.quotients``), however they were
evaluated. A model that cannot be traced is evaluated eagerly point by point
(and a note says so), never silently skipped.

Every point is evaluated on tensors no earlier evaluation saw
(``autodiff.fresh``), the inputs it does not move included: a library that
caches results by the input tensor (a TensorFlow Probability bijector) must
compute each point, never answer from an earlier one.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from gradcli.numerics.autodiff import fresh
from gradcli.numerics.difference_rule import SIGNS
from gradcli.numerics.held import formed, tensor_of
from gradcli.numerics.in_place import InPlaceLoop
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: Memory for one chunk of batched perturbed points (2 signs x B directions x
#: n elements), for dense directions and the eager fallback: each point is a
#: copy of the group, and a chunk that stays in cache (about 16 MB) measured
#: 2-7x faster than chunks of 256 or more directions on 2 cores.
CHUNK_BYTES = 16 * 2**20
#: Directions per call of the in-place loop (``ModelEvaluator``'s in-place
#: path): a call costs about 0.3 ms over its evaluations (about 0.1 ms each at
#: 43k), so 512 directions make that negligible while progress is still
#: reported (and Ctrl-C is seen) every fraction of a second.
IN_PLACE_CHUNK = 512
#: Up to this many perturbed points in a call, evaluate eagerly instead of tracing.
EAGER_MAX_POINTS = 32
#: A trace that takes several points at once (``FiniteDifferences.traced``
#: with ``many``: a warm check's kept program) gets them in one call while
#: their copies hold at most this many elements (8 MB of float64); more are
#: called one by one, each a copy of the moved input only.
MANY_MAX_ELEMENTS = 2**20
#: ... unless the points' copies hold more than this many elements in all
#: (6 points of a 1.7M-weight network): copying every weight per point then
#: costs more than tracing the model once, and a traced loop forms each point
#: inside the graph (``ModelEvaluator``'s looped path; a ResNet-50's 12
#: points: 9 s eagerly, 2 s looped). Where the function is already traced
#: (``FiniteDifferences.traced``) no trace is left to pay, and each point is
#: one call of that graph: a ResNet-50's joint check took 18 s with its points
#: looped and 15 s called one by one, a 4.8M-weight Transformer's 9.2 s and
#: 7.3 s (bench/layer_speed.py models).
LOOPED_MIN_ELEMENTS = 10_000_000


def chunk_size(elements: int, itemsize: int = 8) -> int:
    """Directions per chunk: as many as fit CHUNK_BYTES, at least 1, at most ``elements``."""
    fit = CHUNK_BYTES // (len(SIGNS) * itemsize * max(1, elements))
    return int(max(1, min(elements, fit)))


def points_looped(directions: int, elements: int, traced) -> bool:
    """``LOOPED_MIN_ELEMENTS``' rule for ``directions`` dense directions of a
    group of ``elements``: a traced loop forms the points, unless the function
    is traced already (``traced`` is not None)."""
    return traced is None and directions * len(SIGNS) * elements > LOOPED_MIN_ELEMENTS


class PairEvaluator(Protocol):
    """The public protocol between ``FiniteDifferences`` and whoever evaluates
    its points (module docstring)."""

    def evaluate_pairs(
        self, group: tuple, kind: str, part: np.ndarray, steps: np.ndarray, remaining: int = 0
    ) -> tuple[dict, dict]:
        """f(x + s_j d_j) and f(x - s_j d_j) per output (``[k, *output_shape]``
        each) for the k directions of one chunk. ``group``: the inputs moved
        together, as one flat vector (``FiniteDifferences.group``); ``kind``
        "axes" (``part``: flat indices into that vector, d_j = e_i) or
        "directions" (``part``: rows ``[k, group size]``, or ``[k, 0]`` where
        the caller's evaluator forms the points itself); ``steps``: s_j
        (``[k]``); ``remaining``: directions still to come after this chunk."""
        ...


class Points:
    """``count`` points made one at a time as they are evaluated
    (``make(i)``: point i's moved inputs): ``each_point`` holds one moved copy
    of the inputs at a time, not all of them (a whole GPT-2 small is 1 GB a
    point in float64)."""

    def __init__(self, count: int, make: Callable[[int], dict]):
        self.count, self.make = count, make

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return (self.make(i) for i in range(self.count))


class ModelEvaluator:
    """The default evaluator: the model itself, in place, vectorised, looped or
    eagerly (module docstring). ``differences`` is the ``FiniteDifferences`` it
    evaluates for: its point, function, outputs, ``traced``, ``jit_compile``,
    ``center`` and ``eager`` flag (set here when tracing fails) are read from
    it, live. ``traces`` caches every traced function and in-place loop (by
    group and path)."""

    def __init__(self, differences, traces: dict):
        self.differences = differences
        self.traces = traces
        #: Seconds per direction of any plain in-place loop so far (``InPlaceLoop``).
        self.seconds_per_direction: float | None = None

    def evaluate_pairs(self, group, kind, part, steps, remaining: int = 0):
        """``PairEvaluator.evaluate_pairs``.

        Unit directions run in place (``_in_place``): one traced loop sets one
        element of a variable, evaluates, and restores it, so no point is ever
        copied. Dense directions (fast-mode probes) are batched copies
        (``_differences``). A handful of points (fast-mode probes) costs less
        run eagerly than one trace of the model (about 0.3 s), or through the
        function's own trace when it has one (``traced``)."""
        fd = self.differences
        eager = len(steps) * len(SIGNS) <= EAGER_MAX_POINTS
        if kind == "axes" and not (eager or fd.eager):
            try:
                return self._in_place(group, part, steps, remaining)
            except Exception:  # not traceable in a loop: run eagerly, point by point
                fd.eager = True
        elements = sum(fd.point[n].size for n in group)
        if kind == "directions" and not fd.eager and points_looped(len(steps), elements, fd.traced):
            try:
                values = self.call((group, "directions looped"), lambda vectorized: self._looped(group),
                                   tf.constant(part), tf.constant(steps))
                return _split_signs(values, len(steps))
            except Exception:  # not traceable in a loop: the eager points below
                fd.eager = True
        if eager or fd.eager:
            return self._eager_pairs(group, kind, part, steps)
        values = self.call(
            (group, kind), self._differences(group, kind), tf.constant(part), tf.constant(steps),
        )
        return _split_signs(values, len(steps))

    def evaluate_points(self, name: str, points: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs at each row of ``points`` (``[k, size of name]``, the
        input's dtype), other inputs at the point: batched, or eagerly when
        the model cannot be traced (``call``). A handful (``EAGER_MAX_POINTS``,
        a Taylor test's or a one-sided ladder's) one call each, as
        ``evaluate_pairs`` takes them (``each_point``): a vectorised trace of
        the model cost 0.1-0.2 s a check where its own trace answers in
        milliseconds."""
        fd = self.differences
        if len(points) <= EAGER_MAX_POINTS:
            shape = fd.point[name].shape
            return self.each_point([{name: tf.constant(row.reshape(shape))} for row in points], points.dtype)
        evaluate = self.group_function((name,))
        outputs = self.differences.outputs
        build = lambda vectorized: lambda rows: map_points(evaluate, rows, outputs, vectorized)  # noqa: E731
        result = self.call((name, "points"), build, tf.constant(points))
        return {o: np.asarray(v) for o, v in result.items()}

    def _eager_pairs(self, group, kind, part, steps):
        """The points one by one, eagerly (``eager_sides``), each input the
        direction does not move passed as it is (an eager split of the whole
        group cost as much as the model). A unit direction sets x_i + s h in a
        copy of its input, as the in-place loop does; a dense one is
        x + d * (s h), as the batched copies compute it: the same points
        either way."""
        fd = self.differences
        dtype = fd.point[group[0]].dtype
        spans = {n: (fd.offset(n), fd.offset(n) + fd.point[n].size) for n in group}

        def point(name, row, step):
            x = fd.point[name].reshape(-1)
            start, _ = spans[name]
            if kind == "axes":
                moved = x.copy()
                moved[row - start] = x[row - start] + step
                return tf.constant(moved.reshape(fd.point[name].shape))
            d = row[start : start + x.size]

            def fill(out):  # x + d * step, formed where the tensor keeps it
                np.multiply(d, step, out=out)
                np.add(out, x, out=out)

            return formed(fd.point[name].shape, np.result_type(x, np.result_type(d, step)), fill)

        def moved(j, sign):
            row, signed = part[j], dtype.type(sign * steps[j])
            if kind == "axes":
                names = [n for n, (start, stop) in spans.items() if start <= row < stop]
            else:
                names = [n for n, (start, stop) in spans.items() if np.any(row[start:stop])]
            return {n: point(n, row, signed) for n in names}

        return self.eager_sides(moved, len(steps), dtype)

    def eager_sides(self, moved, count: int, dtype) -> tuple[dict, dict]:
        """f at the +s and -s sides of ``count`` points (``each_point``):
        ``moved(j, sign)`` gives point j's moved inputs. Per side, output ->
        ``[count, *output_shape]`` in ``dtype``."""
        both = self.each_point(Points(count * len(SIGNS), lambda i: moved(i // len(SIGNS), SIGNS[i % len(SIGNS)])),
                               dtype)
        both = {o: v.reshape((count, len(SIGNS)) + v.shape[1:]) for o, v in both.items()}
        return tuple({o: v[:, i] for o, v in both.items()} for i in range(len(SIGNS)))

    def each_point(self, points: list[dict], dtype) -> dict:
        """f at each of ``points`` (each the inputs it moves; every other input
        is passed as it is), one call each, through ``traced`` when there is
        one, else the model's Python eagerly; all in one call of a trace that
        takes many points (``traced.many``) while their copies are small.
        Output -> ``[len(points), *output_shape]`` in ``dtype``."""
        fd = self.differences
        fixed = self.traces.setdefault("eager inputs", {})  # each unmoved input's tensor, made once

        def inputs(moved: dict) -> dict:  # every input, in the point's order
            for n in fd.point.keys() - moved.keys() - fixed.keys():
                fixed[n] = tensor_of(fd.point[n])
            return {n: moved[n] if n in moved else fixed[n] for n in fd.point}

        many = getattr(fd.traced, "many", None)  # a trace that takes the points at once
        if many is not None and len(points) * sum(v.size for v in fd.point.values()) <= MANY_MAX_ELEMENTS:
            points = [inputs(p) for p in points]
            result = many({n: tf.stack([p[n] for p in points]) for n in fd.point})
            return {o: np.asarray(tf.cast(result[o], dtype)) for o in fd.outputs}
        evaluate = fd.traced or fd.function
        values = {o: [] for o in fd.outputs}
        for moved in points:  # one point alive at a time (``Points``)
            result = evaluate(fresh(inputs(moved)))
            del moved
            for o in fd.outputs:
                values[o].append(np.asarray(tf.cast(result[o], dtype)))
            del result
        return {o: np.stack(v) for o, v in values.items()}

    def _in_place(self, group, part, steps, remaining: int = 0):
        """f(x + s e_i), f(x - s e_i) for the group-flat indices ``part``, without
        copying the group (``numerics.in_place``); ``remaining`` directions are
        still to come (they decide whether XLA pays)."""
        fd = self.differences
        key = (group, "in place")
        if key not in self.traces:
            shapes = {o: tf.TensorShape(np.shape(fd.center[o])) for o in fd.outputs} if fd.center else {}
            self.traces[key] = InPlaceLoop(
                self.group_function(group), self._flat(group), fd.outputs, shapes,
                fd.jit_compile, fd.chunk_length(group, "axes"),
            )
        loop = self.traces[key]
        result = loop(part, steps, remaining, measured=self.seconds_per_direction)
        self.seconds_per_direction = loop.seconds_per_direction or self.seconds_per_direction
        return result

    def _flat(self, group) -> np.ndarray:
        return np.concatenate([self.differences.point[n].reshape(-1) for n in group])

    def group_function(self, group):
        """The model as a function of the group's flat vector (other inputs fixed),
        outputs cast to the group's dtype."""
        fd = self.differences
        others = {n: tensor_of(v) for n, v in fd.point.items() if n not in group}
        shapes = [tuple(fd.point[n].shape) for n in group]
        sizes = [int(fd.point[n].size) for n in group]
        dtype = tf.as_dtype(fd.point[group[0]].dtype)
        outputs = fd.outputs

        def evaluate(flat):
            parts = tf.split(flat, sizes) if len(sizes) > 1 else [flat]
            values = {n: tf.reshape(p, s) for n, p, s in zip(group, parts, shapes)}
            result = fd.function(fresh({**others, **values}))
            return {o: tf.cast(result[o], dtype) for o in outputs}

        return evaluate

    def _looped(self, group):
        """f(x + s_j d_j) for each sign s (all + rows, then all - rows) in one
        traced loop that forms each point inside the loop: for a large network
        along dense directions, where a batch of copies (or eager points, each
        a copy of every weight) costs more than one trace of the model."""
        fd = self.differences
        evaluate = self.group_function(group)
        x = tf.constant(self._flat(group))
        dtype = x.dtype
        shapes = {o: tf.TensorShape(np.shape(fd.center[o])) if fd.center else tf.TensorShape(None)
                  for o in fd.outputs}

        def run(part, steps):
            signed = tf.concat([sign * steps for sign in SIGNS], axis=0)
            rows = tf.tile(tf.range(tf.shape(steps)[0]), [len(SIGNS)])
            return tf.map_fn(
                lambda i: evaluate(x + tf.gather(part, rows[i]) * signed[i]),
                tf.range(tf.shape(signed)[0]),
                fn_output_signature={o: tf.TensorSpec(shapes[o], dtype) for o in fd.outputs},
            )

        return run

    def _differences(self, group, kind):
        """Batched evaluation of x + s_j d_j for each sign s (all + rows, then all -
        rows): copies of the group, vectorised, or eagerly one by one."""
        evaluate = self.group_function(group)
        x = tf.constant(self._flat(group))
        outputs = self.differences.outputs

        def perturbed(part, steps):
            signed = tf.concat([sign * steps for sign in SIGNS], axis=0)
            if kind == "directions":
                return x + tf.tile(part, [len(SIGNS), 1]) * signed[:, None]
            rows = tf.shape(signed, out_type=tf.int64)[0]
            where = tf.stack([tf.range(rows), tf.tile(part, [len(SIGNS)])], axis=1)
            # x + (a sparse matrix of the steps): one broadcast add writes each point once.
            return x[None] + tf.scatter_nd(where, signed, tf.stack([rows, tf.size(x, tf.int64)]))

        return lambda vectorized: lambda part, steps: map_points(
            evaluate, perturbed(part, steps), outputs, vectorized
        )

    def call(self, key, build, *args, eager: bool = False):
        """``build(vectorized)(*args)``: traced and vectorised (cached by ``key``,
        XLA when ``jit_compile``), or eagerly point by point when asked (small batches)
        or when the model cannot be traced or vectorised (then the differences'
        ``eager`` stays set, and the check says so). The leading (batch)
        dimension is left open in the trace, so a second pass or a last chunk
        of another length reuses it (XLA still compiles once per length)."""
        fd = self.differences
        if not (eager or fd.eager):
            if key not in self.traces:
                self.traces[key] = tf.function(
                    build(vectorized=True), jit_compile=fd.jit_compile or None, autograph=False,
                    input_signature=[tf.TensorSpec([None, *a.shape[1:]], a.dtype) for a in args],
                )
            try:
                return self.traces[key](*args)
            except Exception:  # not traceable or not vectorizable: run eagerly
                fd.eager = True
        return build(vectorized=False)(*args)


def _split_signs(values: dict, k: int) -> tuple[dict, dict]:
    """(+ rows, - rows) of a batched evaluation that ran all + rows, then all - rows."""
    values = {o: np.asarray(v) for o, v in values.items()}
    return {o: v[:k] for o, v in values.items()}, {o: v[k:] for o, v in values.items()}


def map_points(evaluate, points, outputs, vectorized: bool) -> dict:
    """``evaluate`` at every row of ``points``: vectorised (pfor) or one by one."""
    if vectorized:
        return tf.vectorized_map(evaluate, points)
    rows = [evaluate(points[i]) for i in range(points.shape[0])]
    return {o: tf.stack([r[o] for r in rows]) for o in outputs}
