"""The tie rule of the layer pass (the package docstring; its verdict is
``verdicts.ties``'): a unit whose only failures are kinks at ties is checked
again with its floating inputs moved off the ties (``moves.moved_off``),
through its signature's trace when it is checked by projections
(``quick.quick_check``), else by the caller's ``check_model``; the ordered tie
break (``_ordered_tie_break``) gathers the evidence that a failing kink at
ties is the gradient of one active piece.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcli.analyses.layers.local import layer_model
from gradcli.analyses.layers.moves import MOVED, ORDERED_BREAK, moved_off
from gradcli.analyses.layers.quick import Draws, quick_check
from gradcli.analyses.layers.traces import call_parts
from gradcli.analyses.layers.units import LayerCall
from gradcli.numerics import autodiff
from gradcli.options import CheckOptions
from gradcli.results import KINK
from gradcli.verdicts.ties import judge_at_ties


def only_kinks(checked) -> bool:
    """Whether every failing pair of a unit's check is a kink whose analytic
    value lies outside the one-sided slopes (``diagnose.refine``), and nothing
    else fails."""
    failing = [p for p in checked.pairs if p.failed]
    return bool(failing) and not checked.not_the_users_function and all(
        p.verdict == KINK for p in failing
    )


def at_broken_ties(parent, call: LayerCall, options: CheckOptions, checked, check_model, traced=None):
    """The tie rule (the package docstring): when every failing kink element is an
    input element whose value another element of that input shares exactly (a
    tie), check the unit again with its floating inputs moved off the ties,
    x + TIE_BREAK max(1, |x|) r (r standard normal). (result, note): the kink
    at the captured activations is earned, not a failure, when the unit passes
    there; else the unit fails with that check's pairs. Kinks that are not
    ties leave the result as it is. A unit checked by projections takes them
    there through its signature's trace (``quick_check``, a pass as strong
    as ``check_model``'s); what that does not settle goes to ``check_model``
    (the caller's, ``analyses.check.check_model``). The verdict is
    ``verdicts.ties.judge_at_ties``'."""
    structure, leaves, inputs, _ = call_parts(call)
    values = {name: np.asarray(leaves[i]) for i, name in inputs.items()}
    if any(p.verdict == KINK and p.failed and p.kinks_shared is not True for p in checked.pairs):
        _ordered_tie_break(parent, call, options, checked, values)
    if not _on_ties(checked, values):
        return checked, None
    rng = np.random.default_rng([options.rng_seed, call.order, 2])
    moved = list(leaves)
    for i in inputs:
        moved[i] = moved_off(np.asarray(leaves[i]), rng)
    args, kwargs = _constant_structure(structure, moved)
    nearby = dataclasses.replace(call, args=tuple(args), kwargs=kwargs)
    quick = None
    if traced is not None and options.mode == "fast":
        quick = quick_check(layer_model(parent, nearby, options.rng_seed, traced), traced, options, Draws())
    again = None if quick is not None and not quick.unsettled else check_model(layer_model(parent, nearby, options.rng_seed), options)
    return judge_at_ties(checked, again, MOVED)


def _ordered_tie_break(parent, call: LayerCall, options: CheckOptions, checked, values: dict) -> None:
    """Evidence that a failing kink at ties is the gradient of one active piece
    (sets ``PairResult.tie_broken_agrees``), for the ties ``diagnose.shared_kinks``
    does not see as shared (its mixed difference moves only the elements it
    examined, and a tied partner may be one it did not).

    Every element of a floating input whose value another element holds is
    moved by ``ORDERED_BREAK max(1, |x|) (1 - i / n)`` (earlier elements end up
    larger), then by the same with the order reversed. Each move breaks every
    tie (checked: the moved values are distinct) and, being so small, leaves
    every other order of the values as it was: the unit is differentiable
    there, and along the move the same piece stays active, so its gradient
    there is a limit of gradients at differentiable points. Where the unit's
    analytic vector-Jacobian product (a fixed cotangent, from ``rng_seed``) at
    the point equals the one at the moved point within the check's tolerance,
    the analytic value at the ties is that piece's gradient (a max pool that
    takes the first maximum of a window agrees with the first order). Whether
    that gradient is right is left to the nearby check of ``at_broken_ties``.
    Deterministic: no random order, so the verdict is the same in every run."""
    local = layer_model(parent, call, options.rng_seed)
    names = [n for n in values if n in local.point and np.issubdtype(np.asarray(values[n]).dtype, np.floating)]
    if not names:
        return
    rng = np.random.default_rng([options.rng_seed, call.order, 3])
    cotangents = {o: rng.standard_normal(np.shape(v)) for o, v in local.outputs.items()}
    wrt = [n for n in local.wrt if n in names]

    def product(point):
        found = autodiff.vjp(local.function, point, wrt, cotangents)
        return {n: (None if found[n] is None else np.asarray(found[n], dtype=np.float64)) for n in wrt}

    try:
        here = product(local.point)
        for sign in (1.0, -1.0):
            moved = dict(local.point)
            for name in wrt:
                x = np.asarray(local.point[name])
                flat = x.reshape(-1)
                _, first, counts = np.unique(flat, return_inverse=True, return_counts=True)
                tied = counts[first] > 1
                order = 1.0 - np.arange(flat.size) / flat.size
                step = ORDERED_BREAK * np.maximum(1.0, np.abs(flat)) * (order if sign > 0 else 1.0 - order)
                shifted = np.where(tied, flat + step, flat).astype(x.dtype)
                if np.unique(shifted[tied]).size != int(tied.sum()):
                    return  # the move did not break every tie: no evidence
                moved[name] = shifted.reshape(x.shape)
            there = product(moved)
            tol = checked.tolerance
            if all(
                (here[n] is None) == (there[n] is None)
                and (here[n] is None or np.all(np.abs(here[n] - there[n]) <= tol.atol + tol.rtol * np.abs(here[n])))
                for n in wrt
            ):
                for p in checked.pairs:
                    if p.verdict == KINK and p.failed and p.input in wrt:
                        p.tie_broken_agrees = True
                return
    except Exception:  # noqa: BLE001 - no evidence, the failure stands
        return


def _on_ties(checked, values: dict) -> bool:
    """Every listed kink outside its slopes is an element of a floating input
    whose value another element of that input holds exactly and whose kink
    other kink elements share (``diagnose.shared_kinks``: where the layer is
    separable in the element, its own slopes bound a subgradient and the
    failure stands), and no pair's kinks were refused by
    ``diagnose.tie_direction`` (moved together, the tied elements show a
    wrong derivative where the layer is differentiable: that is evidence at
    the captured activations, which nearby points do not outweigh)."""
    if any(p.n_tie_refused or (p.verdict == KINK and p.failed and p.kinks_shared is not True
                               and not p.tie_broken_agrees)
           for p in checked.pairs):
        return False  # a kink of one element: its own slopes bound a subgradient (``diagnose.shared_kinks``)
    bad = [(p.input, k) for p in checked.pairs if p.verdict == KINK and p.failed
           for k in p.kinks if not k.subgradient]
    if not bad:
        return False
    for name, kink in bad:
        x = values.get(name)
        if x is None:
            return False  # a weight: the rule moves inputs only
        if np.count_nonzero(x == x[tuple(kink.input_index)]) < 2:
            return False
    return True


def _constant_structure(structure, leaves):
    """``tf.nest.pack_sequence_as`` with numpy leaves made tensors."""
    import tensorflow as tf

    filled = [tf.convert_to_tensor(v) if isinstance(v, np.ndarray) else v for v in leaves]
    return tf.nest.pack_sequence_as(structure, filled)
