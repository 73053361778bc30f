"""The cotangent rule: a gradient function that ignores or mis-scales its
upstream gradient fails, though the unit cotangents of the full check's rows
feed it dy = 1 and agree (``compare.cotangent_failure``).

Closed forms (``tests/models/_upstream.py``): f(x) = sum(x^2), so with a
cotangent c the true J^T c is c 2x; the gradient that ignores dy gives 2x
whatever c, the one that takes |dy| gives |c| 2x. c is the proof's draw,
the first standard normal of the check's seed, and -2 c.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import check_json, fixture, pairs

X = np.array([1.0, -2.0, 0.5])
C = float(np.random.default_rng(0).standard_normal())  # --rng-seed 0


def reported(pair):
    """(element index, analytic, numeric) the rule's explanation gives."""
    found = re.search(r"J\^T c gives (\S+) at x\[(\d)\], those rows combined by c \(c\^T J\) (\S+):", pair["explanation"])
    assert found, pair["explanation"]
    return int(found[2]), float(found[1]), float(found[3])


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_gradient_ignoring_dy_fails_by_the_cotangent_rule(mode):
    run, document = check_json(fixture("upstream_ignores.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "mismatch" and "cotangent rule" in pair["explanation"], pair
    i, analytic, numeric = reported(pair)
    assert analytic == pytest.approx(2 * X[i], rel=1e-9)  # dy ignored (10 digits printed)
    assert numeric in (pytest.approx(C * 2 * X[i], rel=1e-7), pytest.approx(-2 * C * 2 * X[i], rel=1e-7))


def test_a_gradient_using_only_the_magnitude_of_dy_fails_on_the_negative_cotangent():
    run, document = check_json(fixture("upstream_magnitude.py"))
    assert run.exit_code == 1, run
    pair = pairs(document)[("x", "output")]
    assert "cotangent rule" in pair["explanation"], pair
    i, analytic, numeric = reported(pair)
    c = -2 * C if C > 0 else C  # the draw of the two with a negative sign
    assert analytic == pytest.approx(abs(c) * 2 * X[i], rel=1e-9)
    assert numeric == pytest.approx(c * 2 * X[i], rel=1e-7)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_gradient_using_dy_passes(mode):
    run, document = check_json(fixture("upstream_right.py"), "--mode", mode)
    assert run.exit_code == 0, run
    assert pairs(document)[("x", "output")]["verdict"] == "pass"
