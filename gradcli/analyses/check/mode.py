"""auto's choice of mode (``choose_mode``) and the memory guards that stop a
full or joint check before it holds more than fits (``gradcli.memory``).
"""

from __future__ import annotations

import time

import numpy as np

from gradcli.analyses.check.rules import CLEARLY_OVER, JOINT_BLOCKS_FIXED, JOINT_BLOCKS_PER_PROBE, TRACE_SPEEDUP
from gradcli.model.loading import Model
from gradcli.numerics.finite_diff import FiniteDifferences
from gradcli.options import CheckOptions


def eager_call_seconds(model: Model) -> float:
    """Seconds of one eager call of the checked function at the point (the
    second of two: the first may build the model's state); timed at load
    (``loading._forward``) when the model was loaded at this point."""
    import tensorflow as tf

    if model.forward_seconds is not None:
        return model.forward_seconds

    from gradcli.numerics.autodiff import fresh

    model.function(fresh(model.point))
    started = time.perf_counter()
    model.function(fresh(model.point))
    return time.perf_counter() - started


def require_full_memory(model: Model, outputs, size: int, order: int, max_memory) -> None:
    """A full check holds every analytic (output, input) block at once, and a
    numeric block per input; at order 2 also SECOND_ORDER_BLOCKS dense
    size x size blocks (``second_order._full``, calibrated in ``gradcli.memory``).
    Stop first if they would not fit (``gradcli.memory``)."""
    from gradcli.memory import SECOND_ORDER_BLOCKS, dense_bytes, require_memory

    rows = sum(int(np.size(model.outputs[o])) for o in outputs)
    itemsize = np.dtype(model.dtype).itemsize
    dtype = np.dtype(model.dtype)
    what = f"a full check's Jacobian blocks ({rows} x {size} {dtype})"
    second = SECOND_ORDER_BLOCKS * size * size if order == 2 else 0
    if order == 2:
        what += f" and second-derivative blocks ({SECOND_ORDER_BLOCKS} x {size} x {size})"
    require_memory(
        dense_bytes(rows * size + second, itemsize),
        what,
        "The fast mode ({@mode} fast) checks random projections and builds no Jacobian", max_memory,
    )


def require_joint_memory(model: Model, size: int, options: CheckOptions) -> int:
    """``JointCheck`` holds one chunk of its probes' joint directions at a
    time (``joint.JointDraws``), so its working set is ``JOINT_BLOCKS_PER_PROBE``
    copies of the model's elements per probe of a chunk, plus
    ``JOINT_BLOCKS_FIXED`` (``rules``: what each block is, and the measurement
    that calibrates them)."""
    from gradcli.analyses.check.joint import joint_chunk_probes
    from gradcli.memory import dense_bytes, require_memory

    itemsize = max(np.asarray(model.point[n]).dtype.itemsize for n in model.wrt)
    chunk = joint_chunk_probes(size * itemsize, options.probes)
    predicted = dense_bytes((JOINT_BLOCKS_PER_PROBE * chunk + JOINT_BLOCKS_FIXED) * size, itemsize, copies=1)
    require_memory(
        predicted,
        f"the whole-model check along joint directions ({options.probes} probes x {size} elements)",
        "Use fewer {@probes}, or check the whole model input by input ({@by_layer=false})",
        options.max_memory,
    )
    return predicted


def choose_mode(fd: FiniteDifferences, wrt, budget: float, forward_seconds: float | None = None
                ) -> tuple[str, float | None, str]:
    """auto's choice: (mode, predicted seconds of a full check (a lower bound
    when the bound decided) or None, why).

    Rule: timed batches of differences along the largest input, the fastest
    of them, predict the full check (``FiniteDifferences.predict_axes_seconds``).
    Timing costs a trace of the model in a loop and batches of evaluations,
    which is minutes for a network of millions of weights; so first a lower
    bound: a full check evaluates the model at least twice per element, each
    evaluation no faster than ``forward_seconds`` (one eager call of the
    model) divided by ``TRACE_SPEEDUP``. A lower bound over ``CLEARLY_OVER``
    times the budget chooses fast without timing: it can choose fast wrongly
    only for a model whose traced evaluation is over ``CLEARLY_OVER *
    TRACE_SPEEDUP`` times faster than its eager call."""
    if fd.one_batch_per_group(wrt):
        return "full", None, "auto ran the full check: its first pass is one batch per input group"
    size = sum(int(np.size(fd.point[n])) for n in wrt)
    if forward_seconds is not None:
        bound = 2 * size * forward_seconds / TRACE_SPEEDUP
        if bound > CLEARLY_OVER * budget:
            return "fast", bound, (
                f"auto ran the fast check: a full check would take over {bound:.2g} s ({size} "
                f"elements, each at least 2 evaluations of {1e3 * forward_seconds / TRACE_SPEEDUP:.2g} ms), "
                f"over the {budget:g} s budget"
            )
    predicted = fd.predict_axes_seconds(list(wrt))
    if predicted <= budget:
        return "full", predicted, (
            f"auto ran the full check: predicted {predicted:.2g} s (timed batches of "
            f"differences along its largest input, the fastest), within the {budget:g} s budget"
        )
    return "fast", predicted, (
        f"auto ran the fast check: a full check would take about {predicted:.2g} s "
        f"(predicted from timed batches along its largest input, the fastest), over the {budget:g} s budget"
    )
