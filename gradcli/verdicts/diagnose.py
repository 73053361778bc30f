"""Diagnoses: say *what* a failing comparison is looking at.

A central difference that disagrees with the analytic derivative is not always a
bug. ``refine`` re-examines the failing elements of a pair with one-sided
difference quotients on a ladder of steps and reclassifies them. An excuse is
earned only with evidence from the traced graph (``excuses``); the finite
differences alone never excuse a failure.

This module is the diagnoses' one entry point; each rule lives in its own
module, with its reasons:

* ``ladder``: the ladder rule (one-sided slopes, their error estimates, the
  deeper ladder, locally constant and jump evidence).
* ``kink``: the kink and jump rules, and the kink scan of passing pairs;
  ``tied_kinks``: kinks on ties (``tie_direction``, ``shared_kinks``).
* ``surrogate``: the surrogate rule (straight-through estimators).
* ``refine``: the orchestration, the inconclusive and mismatch outcomes, and
  which verdict wins; ``diagnosis``: the record a rule returns and the one
  function that applies it.
* ``nonfinite``: the NaN rule at the point, and where a non-finite value
  comes from; ``raised``: where an exception was raised.
* ``explain``: what the graph adds once the pairs are compared (where a zero
  or disconnected path is cut, the culprit op of a mismatch, the Taylor test).
"""

from __future__ import annotations

from gradcli.verdicts.explain import explain
from gradcli.verdicts.kink import MAX_KINKS, SCAN_COLUMNS, kink_suspects
from gradcli.verdicts.ladder import (
    COLUMNS_PER_BATCH,
    DEEP_LADDER,
    FIRST_COLUMNS,
    JUMP_RATIO,
    JUMP_ROUNDOFF,
    JUMP_STEPS,
    LADDER,
    SURROGATE_STEPS,
    directional_slopes,
    slope_tests,
)
from gradcli.verdicts.nonfinite import (
    first_nonfinite,
    nonfinite_analytic,
    nonfinite_culprit,
    nonfinite_step,
    require_finite,
)
from gradcli.verdicts.raised import raised
from gradcli.verdicts.refine import refine
from gradcli.verdicts.tied_kinks import SHARED_TESTED, TIE_ROWS_SHOWN, TIE_SEED, shared_kinks, tie_direction

__all__ = [
    "COLUMNS_PER_BATCH", "DEEP_LADDER", "FIRST_COLUMNS", "JUMP_RATIO", "JUMP_ROUNDOFF", "JUMP_STEPS", "LADDER",
    "MAX_KINKS", "SCAN_COLUMNS", "SHARED_TESTED", "SURROGATE_STEPS", "TIE_ROWS_SHOWN", "TIE_SEED",
    "directional_slopes", "explain", "first_nonfinite", "kink_suspects", "nonfinite_analytic",
    "nonfinite_culprit", "nonfinite_step", "raised", "refine", "require_finite", "shared_kinks",
    "slope_tests", "tie_direction",
]
