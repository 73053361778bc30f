"""The record a diagnosis rule returns, and the one function that applies it.

Each rule of ``refine`` (kink, surrogate, the ladder's inconclusive and
mismatch outcomes) says what it found as a ``Diagnosis``: the verdict word,
whether the pair fails, the explanation, the warnings it adds and, for a
mismatch, the culprit op it names. ``apply`` writes it on the ``PairResult``:
the one place where a refined verdict is set. The generic outcomes
(mismatch, inconclusive, pass) are worded here; the kink and surrogate
outcomes by their own rules (``kink``, ``surrogate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.results import EXPLANATIONS, INCONCLUSIVE, MISMATCH, PASS, Culprit, PairResult
from gradcli.verdicts.phrases import count


@dataclass
class Diagnosis:
    """What a rule decided for a pair, and why."""

    verdict: str
    failed: bool
    explanation: str
    warnings: list[str] = field(default_factory=list)
    culprit: Culprit | None = None  # the op whose own gradient is wrong (a mismatch)


def apply(pair: PairResult, diagnosis: Diagnosis | None) -> PairResult:
    """Write ``diagnosis`` on ``pair`` (None: the verdict stands)."""
    if diagnosis is None:
        return pair
    if diagnosis.culprit is not None:
        pair.culprit = diagnosis.culprit
    pair.verdict, pair.failed = diagnosis.verdict, diagnosis.failed
    pair.explanation = diagnosis.explanation
    pair.warnings.extend(diagnosis.warnings)
    return pair


def mismatch(n_unearned: int, why_unearned: str, culprit: Culprit | None, n_kinks: int,
             n_surrogate: int) -> Diagnosis:
    """Some element is explained by no rule. ``n_unearned`` elements are
    locally constant with no straight-through estimator to explain them
    (``why_unearned``); ``culprit``: the op whose own gradient is wrong."""
    extra = []
    if n_unearned:
        extra.append(
            f"{count(n_unearned, 'element')} locally constant where the analytic "
            f"gradient is not, and {why_unearned}: not a surrogate"
        )
        if culprit is not None:
            site = culprit.site
            extra.append(
                f"the op whose own gradient is wrong: {site.description} at "
                f"{site.location or site.op_name}"
            )
    if n_kinks:
        extra.append(f"{n_kinks} more elements sit on kinks")
    if n_surrogate:
        extra.append(f"{n_surrogate} are locally constant")
    return Diagnosis(
        MISMATCH, True, EXPLANATIONS[MISMATCH] + (f" ({'; '.join(extra)})" if extra else ""),
        culprit=culprit,
    )


def inconclusive(n_ill_conditioned: int, n_unsettled: int, n_unshown: int) -> Diagnosis:
    """Finite differences cannot resolve the derivative: slopes that disagree
    with no non-smooth op on the path (``n_ill_conditioned``), slopes that do
    not settle (``n_unsettled``), or locally constant elements whose excuse
    the graph cannot show (``n_unshown``)."""
    why = []
    if n_ill_conditioned:
        why.append(
            f"at {count(n_ill_conditioned, 'element')} the one-sided slopes "
            "disagree beyond their error estimates, but no op on the path is non-smooth: "
            "an ill-conditioned function, not a kink"
        )
    if n_unsettled:
        why.append(
            f"at {count(n_unsettled, 'element')} the one-sided slopes "
            "do not settle as the step shrinks"
        )
    if n_unshown:
        why.append(
            f"{count(n_unshown, 'element')} locally constant where the analytic "
            "gradient is not, and the graph cannot show a straight-through estimator "
            "that explains it"
        )
    return Diagnosis(INCONCLUSIVE, True, f"{EXPLANATIONS[INCONCLUSIVE]} ({'; '.join(why)})")


def passed() -> Diagnosis:
    """Every failing element resolved at smaller steps."""
    return Diagnosis(PASS, False, EXPLANATIONS[PASS])
