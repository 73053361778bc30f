"""The batched finite differences of a unit's quick check: the evaluator
(``numerics.evaluators.PairEvaluator``) that plans a unit's points before any
value is known and serves them from the unit's traced call
(``BatchedDifferences``).
"""

from __future__ import annotations

import numpy as np

from gradcli.analyses.layers.units import PROJECTED
from gradcli.numerics.finite_diff import FiniteDifferences


class BatchedDifferences:
    """The evaluator (``finite_diff.PairEvaluator``) of a unit's quick check,
    set as ``differences.evaluator``: the differences keep
    ``numerics.finite_diff``'s step rule, Richardson and error estimate
    unchanged, and ask this object for the values at their points. Along
    random directions with no settling rule, the points of both passes are
    fixed before any value is known, so ``plan_passes`` runs the differences
    once with placeholder values to learn them (which input, which signed
    steps, in order), the caller evaluates them all in one call, and
    ``serve`` runs them again on those values. Outside planning and serving
    (a retry, a failed input's full check) the model evaluates the points,
    as it does without this evaluator."""

    def __init__(self, differences: FiniteDifferences):
        self.differences = differences
        self.model = differences.evaluator  # the default: the model itself
        self.planning: list | None = None
        self.served: list | None = None
        self.input = 0
        self.sizes: list[int] = []
        self.steps: dict[tuple, np.ndarray] = {}  # (input, step scale): its steps, as planned

    def plan_passes(self, wrt, tangents, names=None, step_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input index in ``wrt``, probe, signed step) of every point of
        ``names`` (every input by default) at ``step_scale`` times the step
        rule's step (the round-off retry), in order."""
        self.planning = []
        for n in wrt if names is None else names:
            self.input = wrt.index(n)
            self.along(n, tangents[n], step_scale)
        planned, self.planning = self.planning, None
        self.differences.evaluations = 0
        which = np.concatenate([np.full(2 * len(s), i, np.int32) for i, s in planned])
        probe = np.concatenate([np.tile(np.arange(len(s), dtype=np.int32), 2) for _, s in planned])
        signed = np.concatenate([np.concatenate([s, -s]) for _, s in planned])
        self.sizes = [2 * len(s) for _, s in planned]
        return which, probe, signed

    def serve(self, wrt, tangents, values, names=None, step_scale: float = 1.0) -> dict:
        """``along`` for every input of ``names`` (as planned), on the values
        of the planned points."""
        values = np.asarray(values).astype(self.differences.point[wrt[0]].dtype)
        self.served = np.split(values, np.cumsum(self.sizes)[:-1])
        try:
            return {n: self.along(n, tangents[n], step_scale) for n in (wrt if names is None else names)}
        finally:
            self.served = None

    def along(self, name: str, directions: np.ndarray, step_scale: float = 1.0):
        """``FiniteDifferences.along`` (its step rule) without embedding the
        directions in the group's vector: the points are formed inside the
        traced call (a conv kernel's embedding is tens of megabytes, twice per
        unit)."""
        fd, key = self.differences, (name, step_scale)
        if self.served is None or key not in self.steps:  # served with the steps it was planned with
            self.steps[key] = fd.direction_steps({name: directions}, step_scale)  # (an embedding's: 1.1 s of numpy)
        h = self.steps[key]
        return fd.richardson(fd.group(name), "directions", np.empty((len(h), 0)), h)

    def evaluate_pairs(self, group, kind, part, steps, remaining: int = 0):
        """``PairEvaluator.evaluate_pairs``: placeholders while planning (the
        steps recorded), the planned values while serving, else the model's."""
        if self.planning is not None:
            self.planning.append((self.input, np.asarray(steps).copy()))
            zeros = np.zeros(len(steps), self.differences.point[group[0]].dtype)
            return {PROJECTED: zeros}, {PROJECTED: zeros}
        if self.served:
            values = self.served.pop(0)
            return {PROJECTED: values[: len(steps)]}, {PROJECTED: values[len(steps):]}
        return self.model.evaluate_pairs(group, kind, part, steps, remaining)
