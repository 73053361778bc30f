"""How the tie rule and the nearby-point rule move a point off its kinks: the
floating inputs x moved by ``TIE_BREAK`` max(1, |x|) times a standard normal
draw (``moved_off``, described by ``MOVED``), and the ordered tie break's size
(``ORDERED_BREAK``). No imports of the checks: the whole-model joint check
(``analyses.check.joint``) moves its inputs by the same rule.
"""

from __future__ import annotations

import numpy as np

#: The tie rule: a unit whose only failures are kinks is checked again with its
#: floating inputs x moved by TIE_BREAK max(1, |x|) times a standard normal
#: draw: about 1300 float64 finite-difference steps, so that two tied elements
#: end up within the ladder's reach of each other (h / 2**LADDER) with
#: probability about 1e-6 (a ResNet-50's first max-pool has some 1e5 tied
#: pairs), and under 1% of the activation's size, the same region of the
#: layer's input range.
TIE_BREAK = 2.0**-7
#: The ordered tie break (``_ordered_tie_break``): tied elements moved by
#: ORDERED_BREAK max(1, |x|) (1 - i / n), i their flat index, n the input's size,
#: so earlier elements end up larger (or, the other order, smaller). About 1e-9
#: relative: the increments of neighbouring indices (ORDERED_BREAK / n) stay
#: above float64's ulp for inputs of up to 10**6 elements, and far below any gap
#: between distinct values of a real activation.
ORDERED_BREAK = 2.0**-30


def moved_off(x: np.ndarray, rng) -> np.ndarray:
    """``x + TIE_BREAK max(1, |x|) r`` (r standard normal): off the ties and
    exact kinks of the point, in the same region of its range (``TIE_BREAK``)."""
    return x + (TIE_BREAK * np.maximum(1.0, np.abs(x)) * rng.standard_normal(x.shape)).astype(x.dtype)


MOVED = f"x + 2**{int(np.log2(TIE_BREAK))} max(1, |x|) r, r standard normal"
