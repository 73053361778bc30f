"""The sweep: ``gradcli check --samples N --radius R [--special]``.

Truth: the fixture's bug is known in closed form (wrong only where |x| < 0.25,
or only at x == 0); a witness must reproduce the failure when passed back as
``--set`` (checked by a second, independent run), and the analytic value it
shows there is the buggy formula evaluated with numpy.
"""

from __future__ import annotations

import shlex
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from conftest import check_json, fixture, gradcli, only_model

NEAR_ZERO = fixture("sweep_wrong_near_zero.py")


def sweep_of(doc):
    return only_model(doc)["sweep"]


@lru_cache(maxsize=None)
def text_run_with_junit():
    """``check NEAR_ZERO --samples 10 --radius 1`` once more, as text with a JUnit
    report: a second run of the JSON one's sweep at the same seed (the text shows
    its witness), which the text, JUnit and reproducibility tests all read."""
    report = Path(tempfile.mkdtemp()) / "report.xml"
    run = gradcli("check", NEAR_ZERO, "--samples", "10", "--radius", "1", "--junit-xml", report)
    return run, report.read_text(encoding="utf-8")


def test_wrong_only_near_zero_passes_at_the_point():
    run, doc = check_json(NEAR_ZERO)
    assert run.exit_code == 0, run
    assert only_model(doc)["sweep"] is None


def test_sweep_catches_it_and_the_witness_reproduces_it_alone():
    run, doc = check_json(NEAR_ZERO, "--samples", "10", "--radius", "1")
    assert run.exit_code == 1, run
    sweep = sweep_of(doc)
    assert sweep["points"] == 10 and sweep["n_failing"] >= 1
    worst = sweep["worst"]
    x = np.array(worst["values"]["x"])
    assert np.abs(x).min() < 0.25  # the bug's region, from the docstring
    # Replay: the witness alone (no sweep) fails, at an element with |x| < 0.25.
    args = shlex.split(sweep["witness"])
    assert args[0] == "--set"
    replay = gradcli("check", NEAR_ZERO, "--json", *args)
    assert replay.exit_code == 1, replay
    (pair,) = replay.result["models"][0]["pairs"]
    assert pair["verdict"] == "mismatch"
    weights = np.array([1.0, 2.0, 3.0])
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert abs(x[i]) < 0.25
        assert element["analytic"] == pytest.approx(weights[i] * np.sign(x[i]), rel=1e-12)
        assert element["numeric"] == pytest.approx(weights[i] * x[i] / np.sqrt(x[i] ** 2 + 0.01), rel=1e-7)


def test_the_sweep_is_reproducible_from_its_seed():
    _, first = check_json(NEAR_ZERO, "--samples", "10", "--radius", "1")
    run, _ = text_run_with_junit()  # a second run at the same seed
    assert f"reproduce it alone with: {sweep_of(first)['witness']}\n" in run.stdout
    other = gradcli("check", NEAR_ZERO, "--json", "--samples", "10", "--radius", "1", "--rng-seed", "3")
    assert sweep_of(other.json())["worst"]["values"] != sweep_of(first)["worst"]["values"]


def test_text_report_prints_the_witness():
    run, _ = text_run_with_junit()
    assert run.exit_code == 1
    _, doc = check_json(NEAR_ZERO, "--samples", "10", "--radius", "1")
    assert f"reproduce it alone with: {sweep_of(doc)['witness']}" in run.stdout


def test_special_zero_point_catches_a_bug_only_at_zero():
    path = fixture("sweep_wrong_at_zero.py")
    run, doc = check_json(path, "--samples", "5", "--radius", "0.5")
    assert run.exit_code == 0, run  # random points never hit an exact zero
    run, doc = check_json(path, "--special")
    assert run.exit_code == 1, run
    worst = sweep_of(doc)["worst"]
    assert worst["label"] == "x = 0"
    replay = gradcli("check", path, "--json", *shlex.split(sweep_of(doc)["witness"]))
    assert replay.exit_code == 1
    (pair,) = replay.result["models"][0]["pairs"]
    # At 0: analytic 2*0 + 1 times w, numeric 0.
    got = {e["input_index"][0]: e for e in pair["failing"]}
    for i, w in enumerate([1.0, 2.0, 3.0]):
        assert got[i]["analytic"] == pytest.approx(w) and abs(got[i]["numeric"]) < 1e-9


def test_special_points_include_clipping_boundaries_of_the_graph():
    from gradcli.analyses.sweep import special_points
    from gradcli.model.loading import load_model

    model = load_model(fixture("sweep_boundaries.py"))
    labels = [label for label, _ in special_points(model)]
    # tf.clip_by_value is a Minimum and a Maximum against its constants.
    for value, op in (("6", "Relu6"), ("-1.5", "Maximum"), ("2.5", "Minimum")):
        assert any(label.startswith(f"x = {value} everywhere ({op} at tests/models/sweep_boundaries.py:")
                   for label in labels), labels
    assert "x[0] = 6 (Relu6 at tests/models/sweep_boundaries.py:10)" in labels
    assert "w[0] = 0 (Relu at tests/models/sweep_boundaries.py:11)" in labels
    assert labels.count("x = 0") == 1 and not any(l.startswith("x = 0 everywhere") for l in labels)
    assert "tie x[0] = x[1]" in labels


def test_correct_model_passes_the_whole_sweep():
    run, doc = check_json(fixture("sweep_boundaries.py"), "--samples", "4", "--special")
    assert run.exit_code == 0, run
    sweep = sweep_of(doc)
    assert sweep["n_failing"] == 0 and sweep["points"] >= 10


@pytest.mark.parametrize("args, message", [
    (["--samples", "-1"], "--samples"),
    (["--radius", "0"], "--radius"),
])
def test_bad_sweep_options_are_usage_errors(args, message):
    run = gradcli("check", NEAR_ZERO, *args)
    assert run.exit_code == 2 and message in run.stderr


def test_junit_has_a_failing_sweep_testcase():
    import xml.etree.ElementTree as ET

    run, report = text_run_with_junit()
    assert run.exit_code == 1, run
    cases = {c.get("name"): c for c in ET.fromstring(report).iter("testcase")}
    assert cases["x"].find("failure") is None  # the given point passes
    failure = cases["sweep"].find("failure")
    assert failure is not None and failure.get("type") == "sweep"
    assert "reproduce it alone with: --set" in failure.text
