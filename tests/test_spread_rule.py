"""The spread rule: a gradient the user wrote is checked alone over a spread
of inputs, not only where the model's point sends it (``ModelGraph.spread_culprit``).

Closed forms (``tests/models/_spread.py``): the soft clip's true derivative is
1 - tanh(x)^2; the wrong twin gives twice that for |x| > 2, which the model's
point (inputs within 1) never reaches. The culprit's probe is <u, J^T v> with
J^T v = factor * (1 - tanh^2) v, off by up to 2x (elements beyond 2 against
elements within).
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES, check_json, fixture, line_of, pairs


@pytest.mark.parametrize("name", ["spread_softclip_wrong.py", "spread_keras_wrong.py"])
def test_a_custom_gradient_wrong_only_off_the_point_fails_with_its_culprit(name):
    run, document = check_json(fixture(name))
    assert run.exit_code == 1, run
    failed = [p for p in pairs(document).values() if p["failed"]]
    assert failed, run
    for pair in failed:
        assert pair["verdict"] == "mismatch" and "spread rule" in pair["explanation"], pair
        culprit = pair["culprit"]
        assert culprit["site"]["description"] == "tf.custom_gradient softclip", culprit
        defined = line_of(FIXTURES / "_spread.py", "def softclip(x):")
        assert culprit["definition"].endswith(f"_spread.py:{defined}"), culprit
        assert culprit["checked"].startswith("own gradient at its inputs"), culprit
        # The probe mixes elements beyond 2 (off by 2x) with elements within.
        assert abs(culprit["analytic"] - culprit["numeric"]) > 1e-3 * abs(culprit["numeric"]), culprit


@pytest.mark.parametrize("name", ["spread_softclip.py", "spread_keras.py", "spread_log.py"])
def test_right_custom_gradients_pass_the_spread_and_say_where_they_were_checked(name):
    run, document = check_json(fixture(name))
    assert run.exit_code == 0, run
    (model,) = document["result"]["models"]
    note = next(n for n in model["notes"] if n.startswith("user-written gradients checked alone"))
    assert "its inputs scaled to magnitude -10" in note and "uniform draws in [-3, 3]" in note, note


def test_the_spread_keeps_to_the_domain_of_a_log():
    """Negated and uniform points give NaN for log: no verdict there, and the
    positive points (scaled to magnitude 3 and 10) are checked and pass."""
    run, document = check_json(fixture("spread_log.py"))
    assert run.exit_code == 0, run
    assert pairs(document)[("x", "output")]["verdict"] == "pass"


def test_a_librarys_custom_gradient_is_not_called_the_users():
    """tf.nn.silu is a tf.custom_gradient of TensorFlow's own (swish_impl):
    the spread rule checks the gradients defined in the user's files only
    (an EfficientNet holds dozens of these)."""
    import gradcli
    import tensorflow as tf

    result = gradcli.check(lambda x: tf.nn.silu(x), ([0.3, -1.0, 2.0],))
    (model,) = result.models
    assert not model.failed
    assert not any(n.startswith("user-written gradients") for n in model.notes), model.notes
