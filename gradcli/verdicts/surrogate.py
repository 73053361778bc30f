"""The surrogate rule: a straight-through gradient of a piecewise-constant function.

* ``surrogate``: the function does not change at all, to the last bit, for any
  of the smallest ``ladder.SURROGATE_STEPS`` steps on either side (it is
  piecewise constant here) while the analytic derivative is not zero, AND a
  straight-through estimator on the path (``excuses.straight_through``:
  FakeQuant*, an overridden quantizer gradient, ``x + stop_gradient(q(x) -
  x)``, a ``tf.custom_gradient`` around a quantizer) explains the element:
  with the estimators' results held constant the gradient left there is zero
  (``excuses.gradient_beside``). A failure unless surrogates are allowed.
  Without an estimator the element is a ``mismatch`` (an op bug such as an
  overwritten scatter or stitch entry), and the op whose own gradient is wrong
  is named (``ModelGraph.culprit``); without a traced graph, ``inconclusive``.
* FakeQuant ops that the input reaches by several paths
  (``ModelGraph.surrogate_sites``) explain elements that are not locally
  constant themselves: the extreme elements get the sum of the paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.results import EXPLANATIONS, SURROGATE
from gradcli.verdicts import excuses
from gradcli.verdicts.diagnosis import Diagnosis
from gradcli.verdicts.ladder import LADDER, SURROGATE_STEPS
from gradcli.verdicts.phrases import count


@dataclass
class SurrogateFinding:
    """What the surrogate rule found among locally constant elements (each
    ``[output size, columns]``): ``surrogate`` (an estimator explains it),
    ``unearned`` (a wrong gradient: a mismatch, ``why_unearned`` says why),
    ``unshown`` (no graph to show either: inconclusive); ``constructions``:
    the estimators on the path (None: the graph could not tell)."""

    surrogate: np.ndarray
    unearned: np.ndarray
    unshown: np.ndarray
    constructions: list | None = None
    why_unearned: str = ""


def find_surrogates(graph, pair, evidence, locally_constant, sub_a, cols, tol) -> SurrogateFinding:
    """Surrogate rule: locally constant, a non-zero analytic value, AND a
    straight-through estimator on the path that explains the element."""
    found = SurrogateFinding(*(np.zeros_like(locally_constant) for _ in range(3)))
    if not locally_constant.any():
        return found
    found.constructions = constructions = evidence.constructions
    if constructions is None:
        found.unshown = locally_constant
    elif not constructions:
        found.unearned = locally_constant
        found.why_unearned = "no straight-through estimator is on the path"
    else:
        rows = np.flatnonzero(locally_constant.any(axis=1))
        beside = excuses.gradient_beside(graph, pair.input, pair.output, constructions, rows)
        if beside is None:
            found.unshown = locally_constant
        else:
            rest = np.zeros(sub_a.shape)
            rest[rows] = beside[:, cols]
            found.unearned = locally_constant & (np.abs(rest) > tol.atol + tol.rtol * np.abs(sub_a))
            found.surrogate = locally_constant & ~found.unearned
            found.why_unearned = (
                "with the straight-through estimators held constant the gradient there is "
                "still not zero: another op gives it"
            )
    return found


def several_paths(graph, pair) -> list:
    """The FakeQuant sites the pair's input reaches by several paths
    (``ModelGraph.surrogate_sites``), [] when none or the graph cannot tell."""
    try:
        return graph.surrogate_sites(pair.input, pair.output) or []
    except Exception:  # graph analysis is a bonus: never lose the report
        return []


def several_paths_warning(pair, sites) -> str:
    return (
        "the straight-through gradient reaches "
        f"{pair.input} by several paths ({'; '.join(s.description for s in sites)}): "
        "the extreme elements get the sum of them, and there the function is "
        "not constant either"
    )


def surrogate_verdict(n_surrogate: int, n_kinks: int, constructions, allow_surrogate: bool) -> Diagnosis:
    """Every unexplained element a surrogate: a failure unless allowed."""
    # The option is named as {@allow_surrogate}: the command line's report
    # spells it as its flag, the API's as its keyword (errors.spell_texts).
    allowed = "{@allow_surrogate}"
    explanation = (
        f"{EXPLANATIONS[SURROGATE]} ({n_surrogate} elements; the numeric derivative "
        f"is zero at every step from h/{2 ** (LADDER - SURROGATE_STEPS + 1)} to "
        f"h/{2 ** LADDER}; {'; '.join(c.site.description for c in constructions)})"
        + (f"; allowed by {allowed}" if allow_surrogate else "")
    )
    if n_kinks:
        explanation += f"; {n_kinks} elements sit on kinks"
    warning = (
        f"surrogate gradient: the function is locally constant at "
        f"{count(n_surrogate, 'element')} where the analytic gradient is not"
        + (f" (allowed by {allowed})" if allow_surrogate else "")
    )
    return Diagnosis(SURROGATE, not allow_surrogate, explanation, [warning])
