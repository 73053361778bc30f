"""Where in the input space is the gradient wrong? ``check`` at more points.

Real gradient bugs live at special points (zero, ties, repeated eigenvalues,
the edge of a clipping range), so a pass at one point says little about the
rest. ``sweep`` checks the model again at

* ``samples`` random points: every differentiated input x is moved to
  x + radius * max(1, |x|) * U(-1, 1) element by element (the scale of the step
  rule, so a radius means the same for small and large values), from the
  generator ``default_rng([rng_seed, SWEEP_STREAM])``: the same seed gives the
  same points;
* with ``special``, structured points derived from the inputs and the graph
  (``special_points``): an input all zeros (and all inputs zero at once), the
  two largest elements of an input made equal (a tie), every element equal
  (repeated values), a square matrix set to the identity (repeated eigen- and
  singular values), and every boundary constant of a clipping op the input
  reaches (``ModelGraph.boundaries``: ClipByValue's clip_value_min/max, relu6's
  0 and 6, relu's 0, a Minimum/Maximum against a constant, which is what
  ``tf.clip_by_value`` becomes), put in all elements and in the first element
  alone: exact when the op is fed the input itself, a guess after other ops.
  Points with the same values as an earlier one are dropped.

Each point is written in the inputs' own (native) dtypes and checked exactly as
setting them with the ``overrides`` option would check it (the model is loaded again with those
overrides), so the reported witness reproduces its verdict on its own. A point
where the model itself is not finite or raises (log at 0) is outside its domain:
counted, never a failure. The worst point is the failing one with the largest
relative error; its values, as ``overrides``, are the witness.
"""

from __future__ import annotations

import dataclasses
import json
import shlex

import numpy as np

from gradcli.errors import GradcliError
from gradcli.results import Sweep, SweepPoint

#: Second word of the sweep's seed, so its points differ from the model's own draws.
SWEEP_STREAM = 11
#: At most this many special points (the rest are dropped, and the report says so).
MAX_SPECIAL = 24


def sweep(spec, model, options, check_model, load) -> Sweep:
    """Check ``model`` (loaded from ``spec``) at the points of the module
    docstring; ``load(spec, options)`` and ``check_model(model, options)`` are
    the check's own loader and checker."""
    points = random_points(model, options.samples, options.radius, options.rng_seed)
    dropped = 0
    if options.special:
        special = special_points(model)
        dropped = max(0, len(special) - MAX_SPECIAL)
        points += special[:MAX_SPECIAL]
    result = Sweep(samples=options.samples, radius=options.radius, seed=options.rng_seed,
                   special=options.special, dropped=dropped)
    for label, values in points:
        point_options = dataclasses.replace(options, set={**options.set, **values}, samples=0, special=False)
        try:
            at = load(spec, point_options)
        except GradcliError as exc:  # not defined there: outside the model's domain
            result.outside += 1
            result.outside_examples = (result.outside_examples + [f"{label}: {exc}"])[:3]
            continue
        result.points += 1
        try:
            checked = check_model(at, point_options)
        except GradcliError as exc:  # e.g. a NaN gradient where the function is finite
            point = SweepPoint(label, "error", True, np.inf, _plain(values), str(exc))
        else:
            failing = [p for p in checked.pairs if p.failed]
            verdicts = sorted({p.verdict for p in failing})
            point = SweepPoint(
                label, ", ".join(verdicts) or "pass", bool(failing),
                max((p.max_rel_error for p in failing), default=0.0), _plain(values),
            )
        if point.failed:
            result.n_failing += 1
            if result.worst is None or point.score > result.worst.score:
                result.worst = point
    if result.worst is not None:
        result.witness = witness(result.worst.values)
    return result


def random_points(model, count, radius, seed) -> list[tuple[str, dict]]:
    rng = np.random.default_rng([seed, SWEEP_STREAM])
    points = []
    for k in range(count):
        values = {}
        for name in model.wrt:
            x = _native(model, name)
            move = radius * np.maximum(1.0, np.abs(x)) * rng.uniform(-1.0, 1.0, x.shape)
            values[name] = (x + move).astype(x.dtype)
        points.append((f"random point {k + 1}", values))
    return points


def special_points(model) -> list[tuple[str, dict]]:
    """Structured points (module docstring), each as (label, {input: value})."""
    from gradcli.verdicts.culprit import ModelGraph

    points = []
    native = {n: _native(model, n) for n in model.wrt}
    for name, x in native.items():
        points.append((f"{name} = 0", {name: np.zeros_like(x)}))
    if len(native) > 1:
        points.append(("every input = 0", {n: np.zeros_like(x) for n, x in native.items()}))
    for name, x in native.items():
        if x.size < 2:
            continue
        flat = x.reshape(-1)
        top = np.argsort(-flat, kind="stable")[:2]
        tie = flat.copy()
        tie[top[1]] = flat[top[0]]
        points.append((f"tie {name}[{_index(top[1], x.shape)}] = {name}[{_index(top[0], x.shape)}]",
                       {name: tie.reshape(x.shape)}))
        points.append((f"{name} all equal to its first element", {name: np.full_like(x, flat[0])}))
        if x.ndim >= 2 and x.shape[-1] == x.shape[-2]:
            eye = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape).copy()
            points.append((f"{name} = identity (repeated eigenvalues)", {name: eye}))
    try:
        graph = ModelGraph(model)
        boundaries = {n: graph.boundaries(n) for n in native}
    except Exception:  # graph analysis is a bonus: keep the points found so far
        boundaries = {}
    for name, found in boundaries.items():
        x = native[name]
        for value, where in found:
            points.append((f"{name} = {value:g} everywhere ({where})",
                           {name: np.full_like(x, value)}))
            if x.size > 1:
                first = x.copy().reshape(-1)
                first[0] = value
                points.append((f"{name}[{_index(0, x.shape)}] = {value:g} ({where})",
                               {name: first.reshape(x.shape)}))
    return _distinct(points)


def _distinct(points):
    """The first of the points with the same values (x = 0 and relu's boundary 0)."""
    seen, kept = set(), []
    for label, values in points:
        key = tuple((n, np.asarray(v).tobytes()) for n, v in sorted(values.items()))
        if key not in seen:
            seen.add(key)
            kept.append((label, values))
    return kept


def witness(values: dict) -> str:
    """Command-line arguments setting each input (``overrides``) that reproduce a point, shell-quoted. The
    values are the native-dtype numbers written with Python's shortest round-trip
    repr, so they parse back to exactly the same numbers."""
    return " ".join(
        "{@set} " + shlex.quote(f"{name}={json.dumps(value, separators=(',', ':'))}")
        for name, value in values.items()
    )


def _native(model, name) -> np.ndarray:
    dtype = model.native_dtypes.get(name, model.point[name].dtype)
    return np.asarray(model.point[name]).astype(dtype)


def _plain(values: dict) -> dict:
    return {n: np.asarray(v).tolist() for n, v in values.items()}


def _index(flat, shape) -> str:
    return ", ".join(str(int(i)) for i in np.unravel_index(int(flat), shape)) if shape else ""
