"""A tolerance-free second opinion: the Taylor remainder test.

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
Order >= 1.7 reads "second order" (consistent), 0.7..1.3 "first order" (wrong
gradient, or a kink), and no usable step "exact" (s is linear along u, so the
remainder is round-off at every step). A non-finite slope or remainder reads
"not finite", never "exact".
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics import autodiff
from gradcli.numerics.finite_diff import ROUNDOFF_ULPS, machine_eps
from gradcli.results import Taylor

H0 = 0.1
STEPS = 16
NOISE_FACTOR = 100.0


def taylor_test(model, fd, name: str, output: str, seed: int = 0) -> Taylor | None:
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
    remainders = np.abs(s - s0 - steps.astype(np.float64) * slope)
    eps = machine_eps(fd.rule_dtype(x.dtype))
    floor = NOISE_FACTOR * ROUNDOFF_ULPS * eps * (
        np.abs(values) @ np.abs(flat_v) + np.abs(flat_f0) @ np.abs(flat_v)
    )
    usable = remainders > floor
    orders = [
        float(np.log2(remainders[k] / remainders[k + 1]))
        for k in range(STEPS - 1)
        if usable[k] and usable[k + 1]
    ]
    order = float(np.median(orders[-3:])) if orders else None
    if not (np.isfinite(slope) and np.all(np.isfinite(remainders))):
        verdict = "not finite"  # a NaN remainder is never "exact" (compare's NaN rule)
    elif order is None:
        verdict = "exact" if not usable.any() else "unclear"
    elif order >= 1.7:
        verdict = "second order"
    elif 0.7 <= order <= 1.3:
        verdict = "first order"
    else:
        verdict = "unclear"
    return Taylor(
        steps=[float(h) for h in steps],
        remainders=[float(r) for r in remainders],
        orders=orders,
        order=order,
        verdict=verdict,
    )
