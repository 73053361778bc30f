"""Run a loaded model's forward pass at its point, and refuse what cannot be checked.

Rules: the forward pass must be deterministic (two evaluations at one point
agree to ``REPEAT_ULPS``), because differencing a random function reports noise
as gradient errors; and its outputs must be finite at the point.
"""

from __future__ import annotations

import time

import numpy as np

from gradcli.errors import ModelError
from gradcli.model.core import Model, host_array, is_floating, require_finite, run_model


#: Two evaluations at the same point may differ by this many ulps (reduction
#: order) before the forward pass counts as nondeterministic; finite differences
#: assume about as much round-off (``finite_diff.ROUNDOFF_ULPS``).
REPEAT_ULPS = 8


def forward(model: Model, values: dict) -> dict[str, np.ndarray]:
    """Run the forward pass twice: differencing a random function (dropout,
    unseeded random ops) would report noise as gradient errors. ``values`` is
    held first, in place (``numerics.held``): the point a check runs at is the
    one its forward pass ran at, converted once for every call."""
    from gradcli.numerics.held import hold

    hold(values)
    first = {n: host_array(t) for n, t in run_model(model, values).items()}
    started = time.perf_counter()
    again = {n: host_array(t) for n, t in run_model(model, values).items()}
    model.forward_seconds = time.perf_counter() - started  # the second call: state built by the first
    for name, a in first.items():
        b = again.get(name)
        if not is_floating(a) or b is None or a.shape != b.shape:
            continue
        eps = np.finfo(a.dtype).eps
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        close = np.abs(a - b) <= REPEAT_ULPS * eps * np.maximum(np.abs(a), np.abs(b))
        changed = ~(same | close)
        if changed.any():
            index = [int(i) for i in np.argwhere(changed)[0]] if a.ndim else []
            where = f"{name}[{', '.join(map(str, index))}]" if index else name
            raise ModelError(
                f"{model.name}: the forward pass is nondeterministic: output {where} was "
                f"{a[tuple(index)]:.7g}, then {b[tuple(index)]:.7g} at the same point "
                "(dropout or unseeded random ops?); gradients cannot be checked"
            )
    return first


def check_finite_outputs(model: Model) -> None:
    require_finite(model.name, "output", model.outputs, " at the given point")
