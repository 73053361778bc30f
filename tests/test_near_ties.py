"""Near-ties (``verdicts.ladder``, the near-tie rule): a max pool whose
windows hold two values closer than the check's step (Xception's pools).

Truth: the fixtures' head is a dense layer of ones, so d output / d x_i is
the number of the pool's windows (3x3, strides 2, "same") whose maximum x_i
is (Keras' pool, right), or the sum over windows of 1/k where x_i is one of
the k values within ``SPLIT`` of the maximum (the wrong twin), counted here in
numpy from the point."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest

from conftest import check_json, fixture

pytest.importorskip("keras")

STEP = np.finfo(np.float64).eps ** (1 / 3)  # difference_rule.step_size at |x| <= 1


@lru_cache(maxsize=None)
def point(name: str) -> np.ndarray:
    from gradcli.model.loading import load_model

    return np.asarray(load_model(fixture(name)).point["x"], dtype=np.float64)


def window_weights(x: np.ndarray, split: float | None) -> np.ndarray:
    """d sum(pool(x)) / dx: per window, 1 at its (unique) maximum, or 1/k at
    each of the k values within ``split`` of it."""
    b, rows, cols, ch = x.shape
    grad = np.zeros_like(x)
    for i in range(b):
        for r in range(0, rows, 2):
            for c in range(0, cols, 2):
                for k in range(ch):
                    win = x[i, r:r + 3, c:c + 3, k]
                    top = win.max()
                    hits = (top - win <= split) if split is not None else (win == top)
                    assert split is not None or hits.sum() == 1  # no exact ties at this point
                    grad[i, r:r + 3, c:c + 3, k] += hits / hits.sum()
    return grad


def test_fixture_windows_hold_near_ties_inside_the_step():
    x = point("by_layer_near_tie_pool.py")
    pairs = np.sort(np.abs(x[:, :, 0::2] - x[:, :, 1::2]).reshape(-1))
    assert 1e-11 <= pairs[0] and pairs[-1] <= 3e-6 < STEP
    truth = window_weights(x, None)
    split = window_weights(x, 1e-5)
    assert np.count_nonzero(truth != split) > 300  # hundreds of near-tied windows


def test_near_tied_max_pool_passes_with_the_evidence():
    run, doc = check_json(fixture("by_layer_near_tie_pool.py"), "--by-layer")
    assert run.exit_code == 0, run.output
    (model,) = doc["result"]["models"]
    x = point("by_layer_near_tie_pool.py")
    truth = window_weights(x, None)
    pair = next(p for p in model["pairs"] if p["input"] == "x")
    assert pair["verdict"] == "pass" and not pair["failed"]
    # The worst element at the default step: its analytic value is the closed form.
    worst = pair["worst"]
    assert worst["analytic"] == pytest.approx(truth[tuple(worst["input_index"])], abs=1e-12)
    assert abs(worst["numeric"] - worst["analytic"]) > 0.1  # the central difference crossed the kink
    (warning,) = [w for w in pair["warnings"] if "at near-ties" in w]
    low, high, step = map(float, re.search(r"lies (\S+) to (\S+) away.*step \((\S+)\)", warning).groups())
    assert 1e-11 <= low and high <= 3e-6  # the gaps the fixture built
    assert step == pytest.approx(STEP, rel=0.01)  # eps**(1/3) max(1, |x|), |x| < 1
    pool = next(r for r in model["layers"] if r["path"] == "near_ties/pool")
    assert pool["verdict"] == "pass" and pool["mode"] == "fast"
    (inputs,) = pool["pairs"]
    assert any("at near-ties" in w for w in inputs["warnings"])
    assert not any("jumps" in w for p in model["pairs"] + pool["pairs"] for w in p["warnings"])


def test_pool_splitting_its_gradient_at_near_ties_fails():
    run, doc = check_json(fixture("by_layer_near_tie_pool_wrong.py"), "--by-layer")
    assert run.exit_code == 1, run.output
    (model,) = doc["result"]["models"]
    x = point("by_layer_near_tie_pool_wrong.py")
    truth, split = window_weights(x, None), window_weights(x, 1e-5)
    pair = next(p for p in model["pairs"] if p["input"] == "x")
    assert pair["failed"]
    failing = [e for e in pair["failing"] if e["input_index"]]
    assert failing
    for e in failing:  # each a near-tie, its analytic value the split one, not the max's
        at = tuple(e["input_index"])
        assert e["analytic"] == pytest.approx(split[at], abs=1e-9)
        assert abs(split[at] - truth[at]) >= 0.5
    pool = next(r for r in model["layers"] if r["path"] == "near_ties/pool")
    assert pool["failed"] and [r["path"] for r in model["layers"] if r["failed"]] == ["near_ties/pool"]
