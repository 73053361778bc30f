"""The traced graph's evidence on the path of one pair, gathered once.

Rule: an excuse (``kink``, ``surrogate``) is earned only with evidence from
the traced graph (``excuses``); the finite differences alone never excuse a
failure. Graph analysis that raises shows nothing (``None``): no excuse is
then earned.
"""

from __future__ import annotations

from gradcli.verdicts import excuses


class PathEvidence:
    """What the traced graph shows on the path of one pair (``excuses``),
    computed once, when a diagnosis first needs it. Graph analysis that raises
    shows nothing (``None``): no excuse is then earned."""

    def __init__(self, graph, name, output):
        self.graph, self.name, self.output = graph, name, output
        self._found = {}

    def _get(self, key, fn):
        if key not in self._found:
            try:
                self._found[key] = fn(self.graph, self.name, self.output)
            except Exception:  # graph analysis failed: no evidence
                self._found[key] = None
        return self._found[key]

    @property
    def constructions(self):
        """Straight-through estimators on the path (``excuses.straight_through``)."""
        return self._get("constructions", excuses.straight_through)

    @property
    def nonsmooth(self):
        """Non-smooth ops on the path (``excuses.nonsmooth``)."""
        return self._get("nonsmooth", excuses.nonsmooth)
