"""The numeric rule of every finite difference: steps, quotients, Richardson, error.

Pure numpy, no TensorFlow: how a derivative is formed from f's values at the
points, whoever evaluated them (``numerics.evaluators``), for the engine that
orders the passes (``numerics.finite_diff.FiniteDifferences``).

Step rule (``step_size``): h = eps**(1/3) * max(1, |x|), scipy's rule for
central differences, which balances the O(h**2) truncation error against the
O(eps/h) round-off of the difference quotient. Dense random directions through
a function with non-smooth ops (``nonsmooth``: fast mode's probes of a network
with relus) step ``dense_step_size``, eps**(1/2) * max(1, |x|) in float64: a
direction that moves every element crosses kinks at a rate proportional to
the step, and the smaller step crosses about 400 times fewer (its docstring
gives the reason in full). Along every input of a model at once
(``along_joint``), the step is taken from the largest |x| over the inputs.

Two passes, each a central difference D(s) = (f(x + s d) - f(x - s d)) / 2s:

1. D(h) for every direction (2 evaluations each). Its round-off bound is
   ROUNDOFF_ULPS * eps * max|f| / h (two values, each off by at most
   ROUNDOFF_ULPS * eps * max|f|, divided by 2h). Its truncation error,
   h**2 f'''/6, is not estimated by this pass.
2. D(2h) for the directions the caller did not settle after pass 1 (all of
   them when it gives no ``settled`` rule), combined by Richardson,
   R = (4 D(h) - D(2h)) / 3, which cancels the h**2 term. The error estimate is
   |D(h) - D(2h)| / 3 (the size of the term Richardson removed, an upper bound on
   what is left for smooth functions) plus the round-off bound
   1.5 * ROUNDOFF_ULPS * eps * max|f| / h (R weighs the four values by 4/3 and
   1/3 of their quotients' round-off: (4 * 1 + 1/2) / 3 = 1.5). eps and the
   ulps are those of the dtype the function computes in (``rule_dtype``:
   ``roundoff_ulps`` assumes fewer for 16-bit compute).

Settling rule (the caller's ``settled``; the check's is
``analyses.check.full.FullCheck.settled``): an element is settled after pass 1 when

    |a - D(h)| <= atol + rtol * |a| + FD_SAFETY * roundoff(D(h))

for the analytic value a. Such an element passes the two-level verdict of
``verdicts.compare`` whatever D(2h) turns out to be, because exactly
R - D(h) = (D(h) - D(2h)) / 3, so |a - R| <= |a - D(h)| + |D(h) - D(2h)| / 3,
and that second term is part of the two-level allowance (FD_SAFETY >= 1 times
the Richardson estimate). The second level therefore only runs where it can
change the verdict: a correct gradient costs 2 evaluations per element, a wrong
element 4. A settled element reports D(h) as its numeric value and pass 1's
round-off bound as its error estimate: its truncation error is not estimated,
only shown not to matter for the element's verdict. One pair-level rule could
still differ: ``inconclusive`` fires when an error estimate exceeds a tenth of
the derivatives, and a settled element has no Richardson term to contribute.
For that, D(h)'s truncation error would have to be that large and the analytic
value equal D(h) including it, wrong by exactly the truncation error; the
tests compare both verdicts on models of every kind (tests/test_speed.py).

One-sided slopes for the kink scan (``center``, unit directions only): with
f0 = f(x), pass 1 gives D+(h) = (f(x+h) - f0) / h and D-(h) = (f0 - f(x-h)) / h.
On a smooth function they differ by h * f'' (relative to the slope, a few
1e-6 in float64); at a kink by the slope gap, a sizeable fraction of the
slopes. So an element whose gap exceeds KINK_GAP times the slopes (plus
round-off) is never settled: pass 2 runs there, and the second-order one-sided
slopes right = 2 D+(h) - D+(2h), left = 2 D-(h) - D-(2h) (each f' + O(h**2))
with error |D+(h) - D+(2h)| + |D-(h) - D-(2h)| + 8 ulps eps max|f| / h go to
``diagnose``. A settled element's slopes agree by construction (both are its
D(h), error its round-off): a kink whose gap is under KINK_GAP of the slopes
is not looked for there.

Every quotient is formed here, in numpy, from the two values (``quotients``),
however they were evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: Assumed round-off of one function evaluation, in units of eps * |f|.
ROUNDOFF_ULPS = 8.0
#: The same for 16-bit compute (Keras mixed precision): TensorFlow accumulates
#: float16/bfloat16 matmuls and reductions in float32 and rounds each op's
#: output once, so an evaluation is off by about one ulp of |f|; 8 ulps would
#: make every float16 difference quotient unresolvable (eps 1e-3, h 0.1).
ROUNDOFF_ULPS_16BIT = 1.0
#: An element whose first-pass one-sided slopes differ by more than this
#: fraction of their size is not settled, so the kink scan gets second-order
#: slopes there (module docstring). Smooth functions differ by h f'', about
#: 1e-5 of the slope in float64; kinks worth reporting by far more.
KINK_GAP = 1e-3


def roundoff_ulps(dtype) -> float:
    """ROUNDOFF_ULPS for the dtype a function computes in (see above)."""
    return ROUNDOFF_ULPS_16BIT if str(dtype) in ("float16", "bfloat16") else ROUNDOFF_ULPS


#: Each pass evaluates x + s*d and x - s*d; pass 2 takes s = RICHARDSON_RATIO * h.
SIGNS = (1.0, -1.0)
RICHARDSON_RATIO = 2.0
#: Every point the two passes may evaluate, in units of h (x +- h, x +- 2h).
LEVELS = (1.0, -1.0, RICHARDSON_RATIO, -RICHARDSON_RATIO)


def step_size(scale, dtype) -> np.ndarray:
    """h = eps**(1/3) * max(1, |scale|): see the module docstring for the reason.
    ``dtype`` is the one the function computes in (``FiniteDifferences.rule_dtype``)."""
    return machine_eps(dtype) ** (1.0 / 3.0) * np.maximum(1.0, np.abs(scale))


def dense_step_size(scale, dtype) -> np.ndarray:
    """The step along a dense direction (one that moves every element at once:
    fast mode's random probes) through a function with non-smooth ops:
    eps**(1/2) * max(1, |scale|) in float64, ``step_size`` otherwise. Rule:
    such a direction moves every pre-activation behind the inputs, and the
    relus among them (about 1e5 in a ResNet-50, 3e4 in one of its activation
    layers) cross their kinks at a rate proportional to the step: at
    eps**(1/3) a few of them fall inside the stencil and bend the central
    difference beyond the tolerance. eps**(1/2) crosses about 400 times
    fewer, and in float64 its round-off, about eps**(1/2) |f| / |f'|, stays
    inside the float64 tolerance where |f'| is not far below |f| (the
    truncation error, O(h**2), vanishes). A smooth function keeps the smooth
    rule: its round-off would only weaken the check (an attention layer's
    projections, whose scale is far below |f|, turn inconclusive). In float32
    the round-off would be about 3e-4 relative: the smooth rule stays."""
    if np.dtype(str(dtype)) == np.float64:
        return np.sqrt(machine_eps(dtype)) * np.maximum(1.0, np.abs(scale))
    return step_size(scale, dtype)


def machine_eps(dtype) -> float:
    """eps of a floating dtype, bfloat16 included (numpy's finfo does not know it)."""
    if str(dtype) == "bfloat16":
        return 2.0**-7  # 8 significand bits (7 stored)
    return float(np.finfo(dtype).eps)


def coarser(a, b):
    """The dtype of ``a`` and ``b`` with the larger eps (``b`` may be None)."""
    if b is None:
        return a
    return b if machine_eps(b) > machine_eps(a) else a


@dataclass
class Derivatives:
    """Directional derivatives of every floating output along k directions.

    ``values[out]`` and ``errors[out]`` have shape ``[k, *output_shape]``;
    ``steps`` the step h used per direction; ``settled`` which directions were
    settled after the first pass (their values are D(h), see module docstring).
    """

    values: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    steps: np.ndarray
    evaluations: int
    settled: np.ndarray | None = None
    #: Unit directions with ``center`` only: one-sided slopes (module docstring).
    #: Keys "left", "right", "error" -> per output.
    one_sided: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def joined(cls, parts: list["Derivatives"]) -> "Derivatives":
        """The derivatives along the directions of every part, in order (each
        direction's differences are its own: a batch taken in parts is the
        batch taken at once). Directions only: no one-sided slopes."""
        if len(parts) == 1:
            return parts[0]
        cat = lambda field: {o: np.concatenate([getattr(p, field)[o] for p in parts]) for o in parts[0].values}  # noqa: E731
        settled = None if any(p.settled is None for p in parts) else np.concatenate([p.settled for p in parts])
        return cls(values=cat("values"), errors=cat("errors"), steps=np.concatenate([p.steps for p in parts]),
                   evaluations=sum(p.evaluations for p in parts), settled=settled)


@dataclass
class Central:
    """One pass: D(s) per output (``[k, *output_shape]``) and max |f| over its
    two points; with a centre, also D+(s) and D-(s) (``one_sided``)."""

    values: dict[str, np.ndarray]
    largest: dict[str, np.ndarray]
    forward: dict[str, np.ndarray] = field(default_factory=dict)
    backward: dict[str, np.ndarray] = field(default_factory=dict)


def quotients(up: dict, down: dict, steps: np.ndarray, center: dict | None):
    """D(s) = (f(x + s d) - f(x - s d)) / 2s and max |f| over the points, per
    output; with the centre f0 also D+(s) = (f(x + s d) - f0) / s and
    D-(s) = (f0 - f(x - s d)) / s (the kink scan's one-sided slopes)."""
    central, largest = {}, {}
    sides = {"forward": {}, "backward": {}} if center is not None else {}
    for o, f_up in up.items():
        f_down = down[o]
        s = along(steps, f_up)
        central[o] = (f_up - f_down) / (2.0 * s)
        largest[o] = np.maximum(np.abs(f_up), np.abs(f_down))
        if center is not None:
            f0 = center[o][None]
            sides["forward"][o] = (f_up - f0) / s
            sides["backward"][o] = (f0 - f_down) / s
            largest[o] = np.maximum(largest[o], np.abs(f0))
    return central, largest, sides


def along(h: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``h`` ([k]) shaped to broadcast against ``like`` ([k, *output_shape])."""
    return h.reshape((-1,) + (1,) * (like.ndim - 1))


#: ``central(rows, steps, stage) -> Central``: one pass along the directions
#: ``rows`` (indices into the caller's batch; None: all of them) with ``steps``.
CentralPass = Callable[[np.ndarray | None, np.ndarray, str], Central]


def richardson(
    central: CentralPass, h: np.ndarray, outputs: list[str], rule_dtype, settled: Callable | None = None
) -> Derivatives:
    """The two passes of the module docstring: pass 1 everywhere, pass 2 where
    ``settled`` (and the kink gap) does not say otherwise, combined by
    Richardson with their error estimate. ``rule_dtype`` rules eps and the
    ulps; ``central`` evaluates a pass (``FiniteDifferences`` chunks it)."""
    k = len(h)
    eps, ulps = machine_eps(rule_dtype), roundoff_ulps(rule_dtype)
    first = central(None, h, "finite differences")
    values = {o: v.copy() for o, v in first.values.items()}
    errors = {
        o: ulps * eps * first.largest[o] / along(h, v) for o, v in values.items()
    }
    done = np.zeros(k, bool) if settled is None else np.asarray(settled(values, errors), bool)
    sides = bool(first.forward)
    if sides:
        done &= ~kink_gaps(first, errors, outputs)
    todo = np.flatnonzero(~done)
    one_sided = {}
    if sides:  # settled elements: both slopes are D(h) (module docstring)
        one_sided = {
            "left": {o: v.copy() for o, v in values.items()},
            "right": {o: v.copy() for o, v in values.items()},
            "error": {o: e.copy() for o, e in errors.items()},
        }
    if len(todo):
        second = central(todo, RICHARDSON_RATIO * h[todo], "finite differences, second level")
        for o in outputs:
            d1, d2 = first.values[o][todo], second.values[o]
            largest = np.maximum(first.largest[o][todo], second.largest[o])
            step = along(h[todo], d1)
            values[o][todo] = (4.0 * d1 - d2) / 3.0
            errors[o][todo] = np.abs(d1 - d2) / 3.0 + 1.5 * ulps * eps * largest / step
            if sides:
                p1, p2 = first.forward[o][todo], second.forward[o]
                m1, m2 = first.backward[o][todo], second.backward[o]
                one_sided["right"][o][todo] = 2.0 * p1 - p2
                one_sided["left"][o][todo] = 2.0 * m1 - m2
                one_sided["error"][o][todo] = (
                    np.abs(p1 - p2) + np.abs(m1 - m2) + 8.0 * ulps * eps * largest / step
                )
    return Derivatives(
        values=values, errors=errors, steps=h,
        evaluations=len(SIGNS) * (k + len(todo)),
        settled=None if settled is None else done,
        one_sided=one_sided,
    )


def kink_gaps(first: Central, roundoff: dict, outputs: list[str]) -> np.ndarray:
    """Directions whose first-pass one-sided slopes differ by more than
    KINK_GAP of their size plus round-off: kink suspects, never settled."""
    gap = np.zeros(len(next(iter(first.values.values()))), bool)
    for o in outputs:
        p, m = first.forward[o], first.backward[o]
        far = np.abs(p - m) > KINK_GAP * (np.abs(p) + np.abs(m)) + 4.0 * roundoff[o]
        gap |= far.reshape(len(gap), -1).any(axis=1)
    return gap
