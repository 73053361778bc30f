"""The reentrancy rule: the same reverse pass twice (``same_function._reentrant``)."""

from __future__ import annotations

from conftest import check_json, fixture, gradcli, line_of


def test_a_gradient_with_noise_is_named_nondeterministic_with_its_op():
    run, document = check_json(fixture("nondeterministic_gradient.py"))
    assert run.exit_code == 1, run
    (model,) = document["result"]["models"]
    proof = model["call_proof"]
    assert proof["nondeterministic"] is True and proof["differs"] is True, proof
    line = line_of(fixture("nondeterministic_gradient.py"), "return noisy_square(x)")
    assert proof["site"]["description"] == "tf.custom_gradient noisy_square", proof
    assert proof["site"]["location"] == f"tests/models/nondeterministic_gradient.py:{line}", proof
    assert proof["detail"].startswith(
        f"nondeterministic gradient (tf.custom_gradient noisy_square at "
        f"tests/models/nondeterministic_gradient.py:{line}): two reverse passes"), proof


def test_the_text_report_says_nondeterministic_not_another_function():
    run = gradcli("check", fixture("nondeterministic_gradient.py"))
    assert run.exit_code == 1, run
    assert "FAIL nondeterministic gradient (tf.custom_gradient noisy_square" in run.stdout, run
    assert "not the user's own" not in run.stdout, run
