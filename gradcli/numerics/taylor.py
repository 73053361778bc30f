"""The Taylor remainder test's numbers: remainders and their observed orders.

For a random direction u (max |u_i| = 1) and a random output weighting v, the
scalar s(x) = <v, f(x)> and its analytic directional derivative <J^T v, u> (the
reverse-mode gradient the check is about) give the remainder

    r(h) = |s(x + h u) - s(x) - h <J^T v, u>|,

which shrinks like h**2 when the gradient is right and only like h when it is
wrong (the error term h <error, u> dominates once h is small). The observed
order log2(r(h) / r(h/2)) is taken on the ladder h = H0 max(1, |x|) 2**-k,
k = 0..STEPS-1, over consecutive steps whose remainders stand above the
round-off floor NOISE_FACTOR * ROUNDOFF_ULPS * eps * (|v| . |f|). The reported
order is the median of the last three usable orders (the asymptotic regime).
What an order means (the test's verdict) is ``verdicts.taylor``'s to read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.numerics import autodiff
from gradcli.numerics.finite_diff import ROUNDOFF_ULPS, machine_eps

H0 = 0.1
STEPS = 16
NOISE_FACTOR = 100.0


@dataclass
class Remainders:
    """The remainder ladder of one pair (module docstring)."""

    steps: list[float]
    remainders: list[float]
    orders: list[float]  # log2(r(h) / r(h/2)) for consecutive steps above round-off
    order: float | None  # the median of the last three orders; None: no usable pair of steps
    any_usable: bool  # some remainder stands above the round-off floor
    finite: bool  # the slope and every remainder are finite


def remainders(model, fd, name: str, output: str, seed: int = 0) -> Remainders | None:
    """The remainders r(h) along a random direction of input ``name`` and a
    random weighting of ``output``; None when the gradient has the wrong shape
    (no slope along u: the pair already reports the two shapes)."""
    x = np.asarray(model.point[name])
    f0 = np.asarray(model.outputs[output], dtype=x.dtype)
    rng = np.random.default_rng([seed, 7])
    u = rng.standard_normal(x.shape).astype(x.dtype)
    u /= max(np.abs(u).max(initial=0.0), np.finfo(x.dtype).tiny)
    v = rng.standard_normal(f0.shape)
    grad = autodiff.vjp(model.function, model.point, [name], {output: v})[name]
    if isinstance(autodiff.checked_gradient(grad, x.shape), autodiff.WrongShape):
        return None  # no slope along u: the pair already reports the two shapes
    slope = 0.0 if grad is None else float(np.sum(np.asarray(grad, dtype=np.float64) * u))
    steps = H0 * max(1.0, float(np.abs(x).max(initial=0.0))) * 2.0 ** -np.arange(STEPS)
    steps = np.asarray(steps, dtype=x.dtype)
    values = fd.evaluate(name, x[None] + steps.reshape((-1,) + (1,) * x.ndim) * u[None])[output]
    values = values.reshape(STEPS, -1).astype(np.float64)
    flat_v, flat_f0 = v.reshape(-1), f0.reshape(-1).astype(np.float64)
    s = values @ flat_v
    s0 = float(flat_f0 @ flat_v)
    r = np.abs(s - s0 - steps.astype(np.float64) * slope)
    eps = machine_eps(fd.rule_dtype(x.dtype))
    floor = NOISE_FACTOR * ROUNDOFF_ULPS * eps * (
        np.abs(values) @ np.abs(flat_v) + np.abs(flat_f0) @ np.abs(flat_v)
    )
    usable = r > floor
    orders = [
        float(np.log2(r[k] / r[k + 1]))
        for k in range(STEPS - 1)
        if usable[k] and usable[k + 1]
    ]
    return Remainders(
        steps=[float(h) for h in steps],
        remainders=[float(value) for value in r],
        orders=orders,
        order=float(np.median(orders[-3:])) if orders else None,
        any_usable=bool(usable.any()),
        finite=bool(np.isfinite(slope) and np.all(np.isfinite(r))),
    )
