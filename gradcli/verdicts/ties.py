"""The layer pass's verdicts: a unit's row (``layer_row``, ``judge_layer``,
``layer_error``) and the tie rule's (``judge_at_ties``).

A unit's row is its check's: it fails when a pair fails or the checked
function is not the layer's own; else it is ``kink`` when a pair is, else
``pass``. A unit that could not be checked on its own is ``error``.

The tie rule: the captured activations of a real network hold exact ties (the
zeros a relu makes, met again in a max-pool window), and a max over tied
elements is non-smooth in several elements at once. ``diagnose.refine``'s kink
test bounds the analytic value by the one-sided slopes along one element,
which is a subgradient's bound only when that element is non-smooth on its
own: at a tie of several, a valid subgradient (the gradient of one active
piece) can lie outside it. The layer pass checks such a unit again with its
inputs moved off the ties (``analyses.layers.ties``). It passes there: the
kink is earned (a gap between the slopes, a non-smooth op on the path, a
right gradient at the nearby points where the layer is smooth) and the row is
``kink``, not a failure, with a note. It fails there: the row shows that
check's failure.
"""

from __future__ import annotations

from gradcli.results import DISCONNECTED, EXPLANATIONS, KINK, PASS
from gradcli.results.by_layer import LAYER_ERROR, LayerResult


def layer_row(**fields) -> LayerResult:
    """A unit's row before its check: ``pass`` until its check says otherwise."""
    return LayerResult(**fields, verdict=PASS, failed=False)


def judge_layer(result: LayerResult, checked) -> None:
    """The row of a unit checked by ``check_model`` (``checked``, its
    ``ModelResult``): its failing verdicts joined, "not the layer's own
    function" first when the proof says so; else ``kink``, ``disconnected``
    (no pair reaches the output, the finite differences zero too: a
    PositionEmbedding reads only its input's shape, and a frozen one has no
    weight to check) or ``pass``."""
    result.failed = checked.failed
    failing = sorted({p.verdict for p in checked.pairs if p.failed})
    if checked.not_the_users_function:
        failing.insert(0, "not the layer's own function")
    verdicts = {p.verdict for p in checked.pairs}
    result.verdict = ", ".join(failing) if failing else (
        KINK if KINK in verdicts else DISCONNECTED if verdicts == {DISCONNECTED} else PASS
    )


def layer_error(result: LayerResult, message: str, internal: bool = False) -> None:
    """The row of a unit whose local check could not run; ``internal``: it
    raised what gradcli did not expect (its own bug, never silent: the model's
    check ends in error, ``analyses.check.model``)."""
    result.verdict, result.error, result.internal = LAYER_ERROR, message, internal


def kink_sites(pair) -> list[str]:
    """The non-smooth ops a kink verdict names (its explanation's parenthesis)."""
    text = pair.explanation or ""
    return [text[text.rfind("(") + 1 : text.rfind(")")]] if "(" in text else []


def judge_at_ties(checked, again, moved: str):
    """The tie rule's verdict on a unit whose failing kinks sit on ties, once
    it was checked again with its inputs moved off them (``moved`` says how).
    ``again``: ``check_model``'s result there, or None when the unit's quick
    check passed there. (result, note): ``again`` with a note when it fails
    there; else ``checked`` with its failing kinks earned (not failures) and
    the note that says why."""
    kinks = sum(p.n_kinks for p in checked.pairs if p.verdict == KINK)
    sites = "; ".join(dict.fromkeys(
        k for p in checked.pairs if p.verdict == KINK for k in kink_sites(p)
    ))
    if again is not None and again.failed:
        again.notes.append(
            f"at the captured activations {kinks} elements sit on kinks ({sites}) where the analytic "
            f"value lies outside the one-sided slopes; with the inputs moved off them "
            f"({moved}) the layer fails too: the rows show that check"
        )
        return again, None
    for p in checked.pairs:
        if p.verdict == KINK and p.failed:
            p.failed = False
            p.explanation = (
                f"{EXPLANATIONS[KINK]}; at {p.n_kinks} elements the analytic value lies outside "
                "[left, right], a bound only for an element non-smooth on its own: these are ties of "
                f"several elements ({'; '.join(kink_sites(p))}), and with the inputs moved off them "
                "the layer passes: not a failure"
            )
            p.warnings.append(
                "the analytic value lies outside the one-sided slopes of single elements, which "
                "bound a subgradient only where one element is non-smooth on its own; with the "
                f"inputs moved off the ties ({moved}) the layer passes"
            )
    return checked, (
        f"kink at ties: {kinks} elements sit on kinks shared by several elements ({sites}) at the "
        f"captured activations; moved off them ({moved}), the layer passes its "
        f"{'fast' if again is None else again.mode} check: not a failure"
    )
