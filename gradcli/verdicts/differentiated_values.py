"""The model returns other values when it is differentiated.

The analytic side takes the model under a ``GradientTape`` (reverse mode) or a
``ForwardAccumulator`` (forward mode); finite differences evaluate it with no
tape. Code can tell the two apart and compute other values: TensorFlow runs a
``tf.function``'s forward-and-backward pair, not its inference body, while a
gradient is recorded, and TensorFlow Probability's Gamma and Beta samplers
pick their implementation that way (``tfd.Gamma(alpha).sample(seed=...)``
draws other values under a tape than without one; their gradient is then the
implicit reparameterization gradient of the distribution, not the derivative
of either seeded draw). A gradient of values finite differences never see
cannot agree with them, so the mismatch is right: this rule says why.

Rule (``find``, applied by ``explain``): once per model with a failing
``mismatch`` or ``inconclusive`` pair, the outputs are computed at the point
as the analytic side computes them (``recorded.values_differentiated``: under
a tape watching the differentiated inputs, and under an accumulator), and as
finite differences do (``FiniteDifferences.evaluate`` at the point itself, the
same evaluation their quotients use). An output differs when, for a way,

    max_i |y_diff,i - y_plain,i| > sqrt(eps) (max |y_diff| + max |y_plain|)

with eps of the check's dtype (sqrt(eps): both are the same function up to the
round-off of another evaluation order, a few ulps; a sampler's draws differ by
their own size). The failing pairs of that output keep their verdict and fail
as before; their explanation adds "the model returns other values when
differentiated (under a GradientTape: output[i] is B where finite differences
see A); its gradient is not the derivative of the values finite differences
see", and ``PairResult.value_shift`` records the numbers.

Why it never excuses a wrong gradient: it changes no verdict and passes no
pair; it fires only on outputs whose values actually differ beyond round-off,
measured at the point. A sampler whose draws are the same both ways and whose
gradient is not the derivative of the draw (an implicit gradient written by
hand) keeps the plain mismatch, with no such sentence.
"""

from __future__ import annotations

import numpy as np

from gradcli.numerics import recorded
from gradcli.results import INCONCLUSIVE, MISMATCH, ValueShift

#: Verdicts whose failing pairs may be explained by other values.
EXPLAINED = (MISMATCH, INCONCLUSIVE)


def value_rtol(dtype) -> float:
    """sqrt(eps) of ``dtype`` (the module docstring's reason)."""
    from gradcli.numerics.finite_diff import machine_eps

    return float(np.sqrt(machine_eps(dtype)))


def find(model, fd, dtype) -> dict:
    """Output name -> ``ValueShift`` for every output the model computes
    otherwise when differentiated (the module docstring's rule); {} when none
    does or the values cannot be taken."""
    names = [n for n in model.wrt if n in model.point]
    if not names:
        return {}
    try:  # the point itself, as the quotients' pairs are evaluated: a step of 0
        up, _ = fd.axis_pairs(names[0], [0], [0.0])
        seen = {o: np.asarray(v)[0] for o, v in up.items()}
    except Exception:  # noqa: BLE001 - the model's plain outputs, as finite differences centre on them
        seen = {o: np.asarray(v) for o, v in model.outputs.items()}
    rtol = value_rtol(dtype)
    shifts = {}
    for way, outputs in recorded.values_differentiated(model.function, model.point, list(model.wrt)).items():
        for o, plain in seen.items():
            if o in shifts or o not in outputs:
                continue
            shift = _shift(way, o, plain, outputs[o], rtol)
            if shift is not None:
                shifts[o] = shift
    return shifts


def _shift(way, output, plain, differentiated, rtol) -> ValueShift | None:
    plain = np.asarray(plain)
    differentiated = np.asarray(differentiated)
    if plain.shape != differentiated.shape or not np.issubdtype(plain.dtype, np.floating):
        return None
    plain64, diff64 = plain.astype(np.float64), differentiated.astype(np.float64)
    finite = np.isfinite(plain64) & np.isfinite(diff64)
    if not finite.any():
        return None
    gap = np.where(finite, np.abs(diff64 - plain64), 0.0)
    allowed = rtol * (np.max(np.abs(diff64[finite])) + np.max(np.abs(plain64[finite])))
    worst = int(np.argmax(gap))
    if not gap.flat[worst] > allowed:
        return None
    index = [int(i) for i in np.unravel_index(worst, plain.shape)] if plain.ndim else []
    return ValueShift(way=way, output=output, index=index, plain=float(plain64.flat[worst]),
                      differentiated=float(diff64.flat[worst]), difference=float(gap.flat[worst]),
                      allowed=float(allowed))


def sentence(shift: ValueShift) -> str:
    """The explanation's words for ``shift``."""
    element = f"{shift.output}[{', '.join(map(str, shift.index))}]" if shift.index else shift.output
    return (
        f"the model returns other values when differentiated ({shift.way}: {element} is "
        f"{shift.differentiated:.7g} where finite differences see {shift.plain:.7g}, a difference of "
        f"{shift.difference:.3g} against round-off {shift.allowed:.2g}); its gradient is not the "
        "derivative of the values finite differences see"
    )


def explain_shifts(model, pairs, fd, dtype) -> None:
    """``find`` once for the model, when a pair fails as ``mismatch`` or
    ``inconclusive``; each such pair whose output differs gets the sentence
    and the record (its verdict stands)."""
    failing = [p for p in pairs if p.failed and p.verdict in EXPLAINED and p.input in model.point]
    if not failing:
        return
    try:
        shifts = find(model, fd, dtype)
    except Exception:  # noqa: BLE001 - an explanation is a bonus: never lose the report
        return
    for pair in failing:
        shift = shifts.get(pair.output)
        if shift is not None:
            pair.value_shift = shift
            pair.explanation += f"; {sentence(shift)}"
