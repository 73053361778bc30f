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

Any other answer drops the entry, and the model is loaded again and checked
cold, as a first check of it (``Reload``): a closure that now reads other
Python state is checked as the function it now is. A program that cannot be traced (Python control flow
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
before. From the third, a function whose program was traced from a load that
found no stateful op, or whose only "stateful" ops are gradients of its own
that the program's reverse-mode traces show draw nothing
(``_reverse_runs_no_state``), is not traced and seeded at load to learn it
again (``stateless``, asked by ``analyses.load``): the program vouches for
it, and is proven at the call as above; a vouched load that fails is taken
again without the vouch. At most ``KEPT`` functions are kept (least recently
checked dropped first); each keeps its callable alive while kept.
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
    key: tuple = ()  # its key here (``_key``), and loading's (``_load_key``)
    load_key: tuple = ()
    program: Program | None = None
    precision: tuple | None = None  # compute_precision's (dtype, note)
    checks: int = 0
    refused: bool = False  # the function cannot be run as a program: none is tried again
    #: the function has a gradient of its own (a ``tf.custom_gradient``): the
    #: graph rules (the spread rule) read its trace in every check
    own_gradients: bool = False


_ENTRIES: collections.OrderedDict = collections.OrderedDict()
#: Functions whose kept program was traced from a load that found no stateful
#: op (``Model.stateful``): their next load is not traced to learn it again
#: (``stateless``), each its callable by its key before the dtype is settled.
_STATELESS: collections.OrderedDict = collections.OrderedDict()


class Reload(Exception):
    """A kept program no longer stands for the function (``stale``). The
    caller loads the model again and checks it cold (``check.model``): as a
    first check of it, so nothing the failed attempt ran (the user's own
    call, its random draws) and nothing its load skipped on the program's
    word (``stateless``: the trace, the seeding) shows in the result."""


def stateless(model: Model) -> bool:
    """Whether ``model`` (loaded, its dtype not yet settled) is a function whose
    kept program was traced from a load that found no stateful op: what
    ``loading`` asks before it would trace the model to learn it. The program
    is proven again in the check (``warm_start``, ``proves``); one that no
    longer stands is dropped with this answer (``stale``)."""
    key = _load_key(model)
    return key is not None and _STATELESS.get(key) is model.trace_key[0]


def warm_start(model: Model, outputs: list[str]) -> Entry | None:
    """This model's entry (module docstring), counted as one more check:
    None when the model may keep none (or its program cannot be traced);
    ``Reload`` when its kept program no longer computes this call's outputs.
    From the second check on, the entry holds a program; the caller takes
    the proof with it (``proves``) before any verdict rests on it."""
    key = _key(model, outputs)
    if key is None:
        return None
    entry = _ENTRIES.get(key)
    if entry is not None and entry.target is not model.trace_key[0]:
        entry = None  # another callable now has the id: a fresh entry
    if entry is None:
        entry = _ENTRIES[key] = Entry(target=model.trace_key[0], key=key, load_key=_load_key(model))
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
            # eligible, yet stateful to loading: only a gradient of its own makes it so
            entry.own_gradients = model.stateful is True
        same = _same_outputs(entry.program, model, outputs)
    except Exception:  # noqa: BLE001 - not traceable or runnable as a program: the eager products
        refused(entry)
        return None
    if not same:
        stale(entry)
    if model.stateful is False or (model.stateful and _reverse_runs_no_state(entry.program)):
        _STATELESS[entry.load_key] = entry.target
        while len(_STATELESS) > KEPT:
            _STATELESS.popitem(last=False)
    return entry


def _reverse_runs_no_state(program: Program) -> bool:
    """Whether the program's reverse-mode traces (where a ``tf.custom_gradient``'s
    gradient function runs, traced) hold no stateful op: then the function's own
    gradients draw no random number, the one reason loading counts them
    stateful (``loading._stateful``), and its loads need no fresh kernels."""
    graphs = program.reverse_graphs()
    return bool(graphs) and not any(runs_state(op) for graph in graphs for op in graph.get_operations())


def proves(entry: Entry | None, proof) -> bool:
    """Whether the proof taken with ``entry``'s program (``same_function.prove``)
    lets the program stand for the function: it did not find the two differ."""
    return entry is None or entry.program is None or proof is None or not proof.differs


def refused(entry: Entry) -> None:
    """The program could not be traced or run: the function keeps none, and no
    other is tried for it while its entry is kept."""
    entry.program, entry.refused = None, True
    _STATELESS.pop(entry.load_key, None)


def stale(entry: Entry) -> None:
    """The kept program is not this function now: its entry dropped, and ``Reload``.
    (By the entry's own keys: the graph rules add ops to the model's trace,
    which the eligibility reads, as the check goes on.)"""
    _ENTRIES.pop(entry.key, None)
    _STATELESS.pop(entry.load_key, None)
    raise Reload()


def unvouch(model: Model) -> None:
    """``stateless`` no longer says so of this function (its vouched load failed)."""
    _STATELESS.pop(_load_key(model), None)



def _key(model: Model, outputs: list[str]):
    if model.trace_key is None or not _eligible(model):
        return None
    target, *rest = model.trace_key
    specs = tuple((tuple(np.shape(v)), np.asarray(v).dtype.str) for v in model.point.values())
    return (id(target), *rest, specs, tuple(model.wrt), tuple(outputs))


def _load_key(model: Model):
    """The function and its inputs as loading knows them: before the dtype is
    settled (the shapes and the dtypes the user gave)."""
    if model.trace_key is None:
        return None
    target, *rest = model.trace_key
    specs = tuple((tuple(np.shape(v)), np.dtype(model.native_dtypes.get(n, np.asarray(v).dtype)).str)
                  for n, v in model.point.items())
    return (id(target), *rest, specs, tuple(model.wrt))


def _eligible(model: Model) -> bool:
    if getattr(model.function, "variables", ()):
        return False
    if model.stateful is False:  # no stateful op, no call, no gradient of its own (loading)
        return True
    first = model.first_trace
    if first is None or first[0] is not model.function:
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
