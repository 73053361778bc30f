"""The batched finite differences of a unit's quick check (``BatchedDifferences``):
``numerics.finite_diff``'s engine with its points evaluated in the unit's
traced call. The class is kept as one piece, so that it can follow
``finite_diff``'s engine as that changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.analyses.layers.units import PROJECTED
from gradcli.numerics.finite_diff import FiniteDifferences


@dataclass
class _BatchedDifferences(FiniteDifferences):
    """``numerics.finite_diff``'s engine, its step rule, Richardson and error
    estimate unchanged, with its points evaluated elsewhere. Along random
    directions with no settling rule, the points of both passes are fixed
    before any value is known, so ``plan_passes`` runs ``along`` once with
    placeholder values to learn them (which input, which signed steps, in
    order), the caller evaluates them all in one call, and ``serve`` runs
    ``along`` again on those values."""

    _planning: object = None
    _served: list | None = None

    def plan_passes(self, wrt, tangents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input index, probe, signed step) of every point, in order."""
        self._planning = []
        for i, n in enumerate(wrt):
            self._input = i
            self.along(n, tangents[n])
        planned, self._planning = self._planning, None
        self.evaluations = 0
        which = np.concatenate([np.full(2 * len(s), i, np.int32) for i, s in planned])
        probe = np.concatenate([np.tile(np.arange(len(s), dtype=np.int32), 2) for _, s in planned])
        signed = np.concatenate([np.concatenate([s, -s]) for _, s in planned])
        self._sizes = [2 * len(s) for _, s in planned]
        return which, probe, signed

    def serve(self, wrt, tangents, values) -> dict:
        """``along`` for every input, on the values of the planned points."""
        values = np.asarray(values).astype(self.point[wrt[0]].dtype)
        self._served = np.split(values, np.cumsum(self._sizes)[:-1])
        try:
            return {n: self.along(n, tangents[n]) for n in wrt}
        finally:
            self._served = None

    def along(self, name: str, directions: np.ndarray, step_scale: float = 1.0):
        """``FiniteDifferences.along`` (its step rule) without embedding the
        directions in the group's vector while planning or serving: the
        points are formed inside the traced call (a conv kernel's embedding
        is tens of megabytes, twice per unit)."""
        if self._planning is None and self._served is None:
            return super().along(name, directions, step_scale)
        h = self.direction_steps({name: directions}, step_scale)
        return self._richardson(self.group(name), "directions", np.empty((len(h), 0)), h)

    def _evaluate_pairs(self, group, kind, part, steps, remaining: int = 0):
        if self._planning is not None:
            self._planning.append((self._input, np.asarray(steps).copy()))
            zeros = np.zeros(len(steps), self.point[group[0]].dtype)
            return {PROJECTED: zeros}, {PROJECTED: zeros}
        if self._served:
            values = self._served.pop(0)
            return {PROJECTED: values[: len(steps)]}, {PROJECTED: values[len(steps):]}
        return super()._evaluate_pairs(group, kind, part, steps, remaining)



#: The public name the quick check builds it by.
BatchedDifferences = _BatchedDifferences
