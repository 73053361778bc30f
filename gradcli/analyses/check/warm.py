"""Warm checks: a function checked again in the same process (a loop of
``gradcli.check(f, (x,))`` in a test suite) pays no trace.

What is kept, per function at the same input specs, differentiated inputs and
outputs (``Entry``): a ``numerics.autodiff.Program`` of the function (its
forward values, reverse-mode Jacobian, VJPs and JVPs, each traced once) and
the precision rule's answer for its graph (``compute_precision``).

A kept program stands for the function only while it proves to be it, at
every call (``warm_start``, ``proves``):

* at this call's point it computes the outputs the user's function computed
  eagerly at load (``Model.outputs``), to ``OUTPUT_ULPS`` ulps of their
  largest magnitude; and
* its VJP passes the proof (``same_function.prove``) against the user's own
  eager call.

Any other answer drops the entry and the call is checked cold, from the start
(``check_model``): a closure that now reads other Python state is checked as
the function it now is. A program that cannot be traced (Python control flow
on a tensor's value, a gradient of unknown shape) or raises is dropped for
the eager products, which raise again where the function itself fails.

Which functions (``_eligible``): a plain callable of flat named inputs
(``Model.trace_key``) holding no variables, whose load-time trace
(``Model.first_trace``) holds no stateful op and no ``tf.function`` call: a
traced random draw or variable read would not compute what the eager call
did. A ``tf.custom_gradient`` may be kept: its gradient function is traced
into the program, and the proof compares that with the user's eager call.

When: from the second check of the same function (the first only records
it), so a single check, every command-line run, traces nothing more than
before. At most ``KEPT`` functions are kept (least recently checked dropped
first); each keeps its callable alive while kept.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

from gradcli.model.core import trace_specs
from gradcli.model.loading import Model, runs_state
from gradcli.numerics.autodiff import Program
from gradcli.numerics.difference_rule import machine_eps

#: Functions kept at once (least recently checked dropped first).
KEPT = 16
#: The program's outputs at the point may differ from the eager call's by this
#: many ulps of their largest magnitude: the same ops on the same kernels give
#: the same values up to the order a graph optimiser may fuse them in; a
#: stale constant (a changed closure) moves them by far more.
OUTPUT_ULPS = 16


@dataclass
class Entry:
    """What one function's earlier checks left (module docstring)."""

    target: object  # the user's callable, kept alive so that its id names only it
    program: Program | None = None
    precision: tuple | None = None  # compute_precision's (dtype, note)
    checks: int = 0
    refused: bool = False  # the function cannot be run as a program: none is tried again


_ENTRIES: collections.OrderedDict = collections.OrderedDict()


def warm_start(model: Model, outputs: list[str]) -> Entry | None:
    """This model's entry (module docstring), counted as one more check:
    None when the model may keep none, or when its kept program no longer
    computes this call's outputs (the entry is dropped). From the second
    check on, the entry holds a program; the caller takes the proof with it
    (``proves``) before any verdict rests on it."""
    key = _key(model, outputs)
    if key is None:
        return None
    entry = _ENTRIES.get(key)
    if entry is not None and entry.target is not model.trace_key[0]:
        entry = None  # another callable now has the id: a fresh entry
    if entry is None:
        entry = _ENTRIES[key] = Entry(target=model.trace_key[0])
        while len(_ENTRIES) > KEPT:
            _ENTRIES.popitem(last=False)
    _ENTRIES.move_to_end(key)
    entry.checks += 1
    if entry.refused:
        return None
    if entry.checks == 1:
        return entry
    try:
        if entry.program is None:
            entry.program = Program(model.function, dict(zip(model.point, trace_specs(model.point))),
                                    model.wrt, outputs)
        same = _same_outputs(entry.program, model, outputs)
    except Exception:  # noqa: BLE001 - not traceable or runnable as a program: the eager products
        refused(model, outputs)
        return None
    if not same:
        drop(model, outputs)
        return None
    return entry


def proves(entry: Entry | None, proof) -> bool:
    """Whether the proof taken with ``entry``'s program (``same_function.prove``)
    lets the program stand for the function: it did not find the two differ."""
    return entry is None or entry.program is None or proof is None or not proof.differs


def refused(model: Model, outputs: list[str]) -> None:
    """The program could not be traced or run: the function keeps none, and no
    other is tried for it while its entry is kept."""
    entry = _ENTRIES.get(_key(model, outputs))
    if entry is not None:
        entry.program, entry.refused = None, True


def drop(model: Model, outputs: list[str]) -> None:
    """Forget what this model's function left (module docstring)."""
    key = _key(model, outputs)
    if key is not None:
        _ENTRIES.pop(key, None)


def _key(model: Model, outputs: list[str]):
    if model.trace_key is None or not _eligible(model):
        return None
    target, *rest = model.trace_key
    specs = tuple((tuple(np.shape(v)), np.asarray(v).dtype.str) for v in model.point.values())
    return (id(target), *rest, specs, tuple(model.wrt), tuple(outputs))


def _eligible(model: Model) -> bool:
    first = model.first_trace
    if first is None or first[0] is not model.function or getattr(model.function, "variables", ()):
        return False
    return not any(runs_state(op) for op in first[2].graph.get_operations())


def _same_outputs(program: Program, model: Model, outputs: list[str]) -> bool:
    """The program's outputs at the point against the eager call's (``OUTPUT_ULPS``)."""
    traced = program.forward(program.values(model.point))
    for o in outputs:
        eager, again = np.asarray(model.outputs[o]), np.asarray(traced[o])
        if eager.shape != again.shape or eager.dtype != again.dtype:
            return False
        scale = float(np.max(np.abs(eager), initial=0.0))
        if not np.all(np.isfinite(eager)) or not np.all(
                np.abs(again - eager) <= OUTPUT_ULPS * machine_eps(eager.dtype) * scale):
            return False
    return True
