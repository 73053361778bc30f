"""Precision of a check: the dtype whose steps and tolerances a check uses comes
from the tensors that carry the differentiated values, never from plumbing
beside them; a note that lowers it names the op.

Truth is independent of gradcli: closed-form derivatives (numpy, float64) from
the fixture files' docstrings, source lines read from the fixture files.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from conftest import fixture, gradcli, line_of as source_line


@lru_cache(maxsize=None)
def check_json(name: str, *options: str):
    run = gradcli("check", fixture(name), "--json", *options)
    return run, run.result


def only_model(doc):
    (model,) = doc["models"]
    return model


def pair(doc, input_name="x", output="output"):
    return next(p for p in only_model(doc)["pairs"] if (p["input"], p["output"]) == (input_name, output))


def line_of(name: str, text: str) -> int:
    return source_line(fixture(name), text)


def lowered_notes(model):
    return [n for n in model["notes"] if "computes in" in n]


def assert_float64_rules(model):
    assert model["dtype"] == "float64"
    assert model["tolerance"]["rtol"] == pytest.approx(1e-6)
    assert lowered_notes(model) == [], model["notes"]


# -- plumbing beside the values never lowers the precision ---------------------


def test_recompute_grad_float64_model_keeps_float64_rules_and_passes():
    run, doc = check_json("prec_rule_recompute.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    x = np.array([0.3, -1.2, 2.0, 0.7])
    g = np.sin(x) * np.exp(x / 2)
    truth = 2 * g * (np.cos(x) + np.sin(x) / 2) * np.exp(x / 2)
    worst = pair(doc)["worst"]
    i = worst["input_index"][0]
    assert worst["analytic"] == pytest.approx(truth[i], rel=1e-12)
    assert worst["numeric"] == pytest.approx(truth[i], rel=1e-8)


def test_a_3e_4_error_inside_recompute_grad_fails_at_float64_rules():
    run, doc = check_json("prec_rule_recompute_bad.py")
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert_float64_rules(model)
    p = pair(doc)
    assert p["verdict"] == "mismatch"
    x = np.array([0.3, -1.2, 2.0, 0.7])
    assert len(p["failing"]) == 4
    for element in p["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(2 * np.cos(x[i]), rel=1e-8)
        assert element["analytic"] == pytest.approx(2 * np.cos(x[i]) * (1 + 3e-4), rel=1e-12)


def test_seeded_random_shape_size_and_counter_in_float32_keep_float64_rules():
    run, doc = check_json("prec_rule_plumbing.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    import tensorflow as tf

    x = np.array([0.3, -1.2, 2.0, 0.7, 1.1])
    noise = tf.random.stateless_normal([5], seed=(4, 2), dtype=tf.float32).numpy().astype(float)
    w = np.arange(5, dtype=np.float32) / np.float32(5)
    scale = ((np.float32(1) + noise.astype(np.float32) / np.float32(10)) * (np.float32(1) + w)).astype(float)
    truth = np.cos(x) * scale + 6 * x
    worst = pair(doc)["worst"]
    i = worst["input_index"][0]
    assert worst["analytic"] == pytest.approx(truth[i], rel=1e-12)
    assert worst["numeric"] == pytest.approx(truth[i], rel=1e-8)


def test_float32_constants_in_a_custom_gradient_keep_float64_rules():
    run, doc = check_json("prec_rule_gradient_constants.py")
    assert run.exit_code == 0, run
    assert_float64_rules(only_model(doc))
    x = np.array([0.4, -1.3, 2.2])
    worst = pair(doc)["worst"]
    assert worst["analytic"] == pytest.approx(x[worst["input_index"][0]] ** 2, rel=1e-12)


def test_a_3e_4_error_from_float32_gradient_constants_fails():
    run, doc = check_json("prec_rule_gradient_constants_bad.py")
    assert run.exit_code == 1, run
    assert_float64_rules(only_model(doc))
    p = pair(doc)
    assert p["verdict"] == "mismatch"
    x = np.array([0.4, -1.3, 2.2])
    for element in p["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(x[i] ** 2, rel=1e-8)
        assert element["analytic"] / x[i] ** 2 - 1 == pytest.approx(3e-4, rel=1e-3)


# -- a genuine cast on the path lowers it, and the note names the op -----------


def test_a_cast_on_the_path_gets_float32_rules_and_the_note_names_the_cast():
    name = "prec_rule_cast.py"
    run, doc = check_json(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = lowered_notes(model)
    line = line_of(name, "low = tf.cast(x, tf.float32)")
    assert f"Cast at tests/models/{name}:{line} (op Cast)" in note
    assert "op unknown" not in note
    x = np.array([0.5, -1.5, 1.25])
    worst = pair(doc)["worst"]
    assert worst["numeric"] == pytest.approx(3 * x[worst["input_index"][0]] ** 2, rel=1e-4)


# -- a gradient that raises in float64 falls back to the model's own dtype -----


def resize_truth():
    """R^T R img for the lanczos3 resize R (linear), R built column by column
    from the forward resize of unit images in float64 (no gradient involved)."""
    import tensorflow as tf

    img = np.linspace(-1.0, 1.0, 30, dtype=np.float32).reshape(1, 5, 6, 1).astype(float)
    basis = np.eye(30).reshape(30, 5, 6, 1)
    columns = tf.image.resize(tf.constant(basis), (3, 4), method="lanczos3").numpy().reshape(30, 12)
    r = columns.T  # [12, 30]
    return (r.T @ r @ img.reshape(30)).reshape(5, 6)


def test_a_float32_only_gradient_falls_back_to_the_native_dtype_with_a_note():
    name = "prec_rule_resize.py"
    run, doc = check_json(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = [n for n in model["notes"] if "gradient does not run in float64" in n]
    line = line_of(name, "small = tf.image.resize(")
    assert f"ScaleAndTranslate 'resize/ScaleAndTranslate' at tests/models/{name}:{line}" in note
    assert "ScaleAndTranslateGrad" in note
    truth = resize_truth()
    worst = pair(doc, "img")["worst"]
    _, i, j, _ = worst["input_index"]
    assert worst["analytic"] == pytest.approx(truth[i, j], rel=1e-4, abs=1e-5)
    assert worst["numeric"] == pytest.approx(truth[i, j], rel=2e-3, abs=1e-4)


def test_a_wrong_gradient_beside_a_float32_only_gradient_still_fails():
    run, doc = check_json("prec_rule_resize_bad.py")
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    assert any("gradient does not run in float64" in n for n in model["notes"])
    p = pair(doc, "img")
    assert p["verdict"] == "mismatch"
    truth = resize_truth()
    for element in p["failing"]:
        _, i, j, _ = element["input_index"]
        assert element["analytic"] == pytest.approx(1.02 * truth[i, j], rel=1e-4, abs=1e-5)
        assert element["numeric"] == pytest.approx(truth[i, j], rel=2e-3, abs=1e-4)
