"""The layer pass itself (``check_layers``): capture the units' calls, check
each (the quick check through its signature's trace, else the caller's
``check_model``, then the tie rule), and the table's rows and notes. The
package docstring gives the rules; a row's verdict is ``verdicts.ties``'.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from gradcli.analyses.layers.capture import ModuleTree, capture_calls
from gradcli.analyses.layers.local import layer_model
from gradcli.analyses.layers.plan import LayerPlan, plan_layers, planned_signature
from gradcli.analyses.layers.quick import Draws, quick_check
from gradcli.analyses.layers.ties import at_broken_ties, only_kinks
from gradcli.analyses.layers.traces import call_site, traced_of
from gradcli.analyses.layers.units import LayerCall, unit_mode
from gradcli.errors import GradcliError, debugging, internal_error_message
from gradcli.options import CheckOptions
from gradcli.progress import report
from gradcli.results import Power
from gradcli.results.by_layer import LAYER_ERROR, LayerResult
from gradcli.verdicts import same_function
from gradcli.verdicts.ties import judge_layer, layer_error, layer_row


def check_layers(model, options: CheckOptions, plan: LayerPlan | None, check_model, unit_done=None
                 ) -> tuple[list[LayerResult], list[str]]:
    """The layer-by-layer pass of ``model`` (a Keras ``Model``): one result per
    checked unit call, failures first, and notes for the model's report.
    ``plan``: ``plan_layers``' result when the caller took it already (None:
    taken here). ``check_model``: the whole check a unit goes to when the
    quick check does not settle it (``analyses.check.check_model``, passed in:
    the pass does not import the check that runs it). ``unit_done((path,
    index))``, if given, is called as each unit's check ends."""
    plan = plan_layers(model, options) if plan is None else plan
    if plan.skipped:
        return [], [plan.skipped]
    started = time.perf_counter() - plan.seconds
    calls, estimate = plan.calls, plan.estimate
    report("layers", 0, len(calls), f"estimated {estimate:.0f} s")
    captured = capture_calls(model, plan.root) if not isinstance(plan.root, ModuleTree) else plan.root.capture()
    wanted = {(c.path, c.index) for c in calls}
    results, traces, draws, kept_for_next = [], {}, Draws(), _next_of_same_signature(calls)
    for done, call in enumerate((c for c in captured if (c.path, c.index) in wanted), start=1):
        if done > 1:  # the unit being checked, which a line printed while it runs names (the first: the estimate)
            report("layers", done - 1, len(calls), f"{call.path}; estimated {estimate:.0f} s up front")
        batched = (call.path, call.index) in plan.batched
        results.append(_check_call(model, call, options, traces, draws, check_model, batched))
        if not kept_for_next.get((call.path, call.index)):
            draws.release()
        report("layers", done, len(calls), call.path)
        if unit_done is not None:
            unit_done((call.path, call.index))
    results.sort(key=lambda r: (not r.failed, r.verdict != LAYER_ERROR))
    seconds = time.perf_counter() - started
    full = sum(r.mode == "full" for r in results)
    fast = sum(r.mode == "fast" for r in results)
    notes = [
        f"layer by layer: {len(results)} layer calls checked ({full} in full, {fast} by random "
        f"projections, {len(traces)} local functions traced) in {seconds:.1f} s (estimated "
        f"{estimate:.0f} s up front{_failing_share(results)})"
    ]
    errors = [r for r in results if r.verdict == LAYER_ERROR]
    if errors:
        notes.append(f"{len(errors)} layer calls could not be checked on their own: see the layer table")
    return results, notes


def _failing_share(results: list[LayerResult]) -> str:
    """What the failing layers took of the pass, which its estimate up front
    cannot foresee: a failing layer's inputs are re-checked element by
    element, and its culprit searched for (a wrong GELU in BERT-base's layer
    5: 70 s of a 114 s pass estimated at 66 s)."""
    failing = [r for r in results if r.failed and r.verdict != LAYER_ERROR]
    if not failing:
        return ""
    taken = sum(r.seconds for r in failing)
    which = "the failing layer" if len(failing) == 1 else f"the {len(failing)} failing layers"
    return f", for layers that pass; {which} took {taken:.1f} s of it"


def _next_of_same_signature(calls: list) -> dict:
    """(path, call index) -> whether the next planned unit has the same
    signature (``plan.planned_signature``). The quick check's draws are kept for
    the next unit only then (``quick.Draws``): else they would sit beside its
    work until it draws (GPT-2 small's token embedding: 0.7 GB more at the
    process's peak)."""
    keys = [planned_signature(c) for c in calls]
    return {(c.path, c.index): i + 1 < len(keys) and keys[i + 1] == keys[i] for i, c in enumerate(calls)}


def _check_call(parent, call: LayerCall, options: CheckOptions, traces: dict, draws: Draws, check_model,
                batched: bool = False) -> LayerResult:
    """One unit call: the quick check through its signature's traces when it
    runs by projections (``batched``: its points in batches,
    ``plan.batched_units``), ``check_model`` when it runs in full or the quick
    check does not settle it (the package docstring); the row's verdict is
    ``verdicts.ties``'."""
    started = time.perf_counter()
    layer = call.layer
    result = layer_row(
        name=layer.name, path=call.path, class_name=type(layer).__name__, call_site=call_site(layer),
        call_index=call.index, calls=call.calls, weights=0, elements=0, mode="",
    )
    own = dataclasses.replace(
        options, by_layer=False, layers=None, wrt=None, set={}, samples=0,
        special=False, keep_blocks=False, order=1, taylor=False,
    )
    try:
        traced = traced_of(call, traces, batched)
        local, traced = _local(parent, call, options.rng_seed, traced)
        result.weights = sum(int(np.size(local.point[n])) for n in local.wrt if n in call.names)
        result.elements = sum(int(np.size(local.point[n])) for n in local.wrt if n not in call.names)
        own = dataclasses.replace(own, mode=unit_mode(result.weights + result.elements, len(local.outputs)))
        quick = quick_check(local, traced, own, draws) if own.mode == "fast" and traced is not None else None
        if quick is not None and not quick.unsettled:
            result.mode, result.pairs, result.call_proof, result.notes = "fast", quick.pairs, quick.proof, quick.notes
        else:
            if traced is not None:  # the full machinery: the unit's own call, traced by check_model
                local = layer_model(parent, call, options.rng_seed)
            proof = None
            if quick is not None:  # only the inputs the quick check left unsettled, the proof over all:
                # alone, an input whose gradient is 0 (round-off) gives the proof no scale to compare at
                proof = same_function.prove(local, own.rng_seed)
                local.wrt = [n for n in local.wrt if n in quick.unsettled]
            checked = check_model(local, own, proof=proof)
            if quick is not None:
                again = {p.input: p for p in checked.pairs}  # in the unit's order of inputs
                checked.pairs = [again.get(p.input, p) if p.input in quick.unsettled else p for p in quick.pairs]
                checked.notes.append(
                    f"{len(quick.pairs) - len(quick.unsettled)} of {len(quick.pairs)} inputs settled by the quick "
                    "check's projections; checked again on their own, their projections inconclusive: "
                    f"{', '.join(quick.unsettled)}")
            tie_note = None
            if only_kinks(checked):  # the tie rule (the package docstring)
                checked, tie_note = at_broken_ties(parent, call, own, checked, check_model, traced)
            result.mode, result.pairs, result.call_proof = checked.mode, checked.pairs, checked.call_proof
            result.notes = [n for n in checked.notes if not n.startswith("promoted ")]
            result.notes += [tie_note] if tie_note else []
            judge_layer(result, checked)
    except GradcliError as exc:
        layer_error(result, str(exc))
    except Exception as exc:  # noqa: BLE001 - one layer's surprise never loses the pass
        if debugging():
            raise
        layer_error(result, internal_error_message(exc), internal=True)
    else:
        result.power = layer_power(result.pairs, {n: int(np.size(v)) for n, v in local.point.items()})
    result.seconds = time.perf_counter() - started
    return result


def _local(parent, call: LayerCall, seed: int, traced):
    """(the unit's local function, its signature's trace or None): through the
    trace where it serves, else the layer's own eager call, which
    ``check_model`` traces itself and runs eagerly where that fails, as for a
    whole model (a layer that reads a tensor's value: ``.numpy()``, Python
    control flow on it)."""
    if traced is None:
        return layer_model(parent, call, seed), None
    try:
        return layer_model(parent, call, seed, traced), traced
    except GradcliError:
        raise
    except Exception:  # noqa: BLE001 - not traceable: the eager call says what else is wrong
        return layer_model(parent, call, seed), None


def layer_power(pairs: list, sizes: dict):
    """The power of a unit's projections as a whole: the weakest of its
    pairs' (the largest single-element error some pair's projections could
    miss), relative to the RMS element of the whole unit's gradient (pooled
    over those pairs, each weighted by its number of elements). Relative to
    each pair's own RMS element instead, a pair whose gradient is zero by
    symmetry (an attention key's bias: softmax ignores it) has an RMS element
    of round-off and a meaningless relative power (1e5 %) that would stand
    for the whole layer."""
    powered = [p for p in pairs if p.power is not None]
    if not powered:
        return None
    weakest = max(powered, key=lambda p: p.power.absolute)
    count = sum(sizes.get(p.input, 1) for p in powered)
    rms = float(np.sqrt(sum(sizes.get(p.input, 1) * p.power.element_size**2 for p in powered) / count))
    return Power(
        absolute=weakest.power.absolute, relative=weakest.power.absolute / rms if rms > 0 else float("inf"),
        element_size=rms, probability=weakest.power.probability, probes=weakest.power.probes,
    )
