"""The verdicts of the whole-model joint check's failing rows
(``analyses.check.joint.JointCheck``): the kink rule along the failing joint
probes (``judge_joint_kinks``) and the nearby-point rule (``judge_nearby``).

The evidence comes from the check: for each failing probe, the one-sided
slopes along it by the ladder rule (``diagnose.directional_slopes``) projected
by its cotangent, and ``diagnose.slope_tests``' reading of them (a gap between
the slopes, slopes that settle as the step shrinks, an analytic value between
them, slopes that agree with it); for the nearby-point rule, a callback that
runs the joint check again at a point moved off the kinks.
"""

from __future__ import annotations

import numpy as np

from gradcli.results import EXPLANATIONS, INCONCLUSIVE, KINK, PASS


def judge_joint_kinks(pair, probes: int, gap, settled, between, agrees, slopes: str,
                      at_nearby_point=None, moved: str = "") -> None:
    """A failing joint row through non-smooth ops, judged on its ``probes``
    failing probes' one-sided slopes (``slopes``: them, in words). Every
    failing probe's slopes settle, agree with each other and with the analytic
    value: a pass (kinks crossed inside the step). Every one's slopes differ
    beyond their errors, the analytic value between them: ``kink``, not a
    failure (the point is not differentiable along the probes: a relu input
    exactly at 0, a dead channel's zero moved by its bias), and the layer
    table judges the layers. Slopes that do not settle: ``inconclusive``,
    still a failure. Every other failing row goes to the nearby-point rule
    (``judge_nearby``, when ``at_nearby_point`` is given: the check not
    already at a nearby point): slopes that do not settle, slopes with a gap
    that do not bound the analytic value, and settled slopes that agree with
    each other but not with the analytic value. The last is what a bug outside
    every layer gives (it fails nearby too), and also what the chain rule gives
    through activations exactly on their kinks: the composition of each
    kink's one-sided derivative need not be the derivative of the whole, even
    where the whole is differentiable along the probe (relu(z) - relu(-z) at
    z = 0 is z, with slope 1; the chain rule gives 0). A joint row is judged
    only when every layer passed, and the chain rule is right almost
    everywhere, so a nearby point off the kinks tells the two apart."""
    if np.all(~gap & settled & agrees):
        pair.verdict, pair.failed, pair.reverse_failed = PASS, False, False
        pair.failing, pair.n_failing = [], 0
        pair.explanation = EXPLANATIONS[PASS]
        pair.warnings.append(
            f"kinks inside the step along {probes} joint probes: at smaller steps both one-sided "
            f"slopes agree with the analytic value ({slopes})"
        )
    elif np.all(gap & between):
        pair.verdict, pair.failed, pair.reverse_failed = KINK, False, False
        pair.explanation = (
            f"{EXPLANATIONS[KINK]} along {probes} joint probes, and the analytic value lies between "
            f"them ({slopes}): the point is not differentiable along them, not a failure; the layer "
            "table judges each layer"
        )
        pair.warnings.append(
            "the whole model is not differentiable at the point along the joint probes (one-sided "
            "slopes differ, non-smooth ops on the path): its projection cannot judge the gradient there"
        )
    else:
        if not np.all(settled):
            pair.verdict = INCONCLUSIVE
            pair.explanation = (
                f"{EXPLANATIONS[INCONCLUSIVE]} (along {int(np.sum(~settled))} of the failing joint probes the "
                f"one-sided slopes do not settle as the step shrinks: the network crosses kinks at every "
                f"scale of the step along them; {slopes}): the layer table judges each layer"
            )
        if at_nearby_point is not None:
            clean = bool(np.all(settled & ~gap))  # slopes that agree with each other, not with the analytic value
            judge_nearby(pair, at_nearby_point(), slopes, moved, clean)


def judge_nearby(pair, nearby, slopes: str, moved: str, clean: bool = False) -> None:
    """The nearby-point rule for a joint row the one-sided slopes cannot
    settle: slopes that do not settle, or an analytic value outside them
    (``judge_joint_kinks``), are what kinks of many elements at once give: a
    network whose activations sit exactly on its kinks (a zero-padded
    window's pre-activation is its bias, exactly 0 at initialization) moves
    them all along a joint probe, and a valid subgradient of several kinks
    need not lie between the slopes of their sum. The joint check ran again
    at a nearby point (``nearby``: its pair), every input moved off the kinks
    (``moved`` says how: as the tie rule moves a layer's inputs), where the
    network is differentiable along the probes: it passes there, and the row
    is ``kink``, not a failure, with a warning (the evidence: slopes that do
    not settle or do not bound the analytic value at the point, a non-smooth
    op on the path, a right gradient nearby); it fails there, and the row
    stands, with a warning giving that check's verdict. ``clean``: the
    slopes settled and agreed with each other, not with the analytic value
    (the chain rule through activations exactly on their kinks,
    ``judge_joint_kinks``), which the explanation then says."""
    where = f"at a nearby point (every input moved: {moved})"
    if nearby.failed:
        pair.warnings.append(f"{where} the whole model's joint check fails too ({nearby.verdict}: "
                             f"{nearby.explanation})")
        return
    pair.verdict, pair.failed, pair.reverse_failed = KINK, False, False
    if clean:
        pair.explanation = (
            "the point sits on kinks of its activations: along the failing joint probes the one-sided "
            f"slopes agree with each other but not with the analytic value ({slopes}), as the chain rule "
            "gives through activations exactly on their kinks (each kink's one-sided derivative, composed, "
            f"need not be the derivative of the whole); {where} the whole model passes its joint check "
            f"({nearby.verdict}): not a failure; the layer table judges each layer"
        )
        pair.warnings.append(
            "the gradient at the point is the chain rule through activations exactly on their kinks, "
            f"not the whole model's derivative along the joint probes; {where} it passes"
        )
        return
    pair.explanation = (
        f"{EXPLANATIONS[KINK]} along the failing joint probes ({slopes}): at the point their one-sided "
        "slopes do not settle or do not bound the analytic value, as kinks of many elements at once "
        f"give; {where} the whole model passes its joint check ({nearby.verdict}): not a failure; "
        "the layer table judges each layer"
    )
    pair.warnings.append(
        "the whole model is not differentiable at the point along the joint probes (kinks of many "
        f"elements at once); {where} it passes"
    )
