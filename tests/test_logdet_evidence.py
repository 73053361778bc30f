"""``gradcli logdet`` on its own evidence (issue 35, item 10).

The autodiff Jacobian is checked against central differences of the flow
before its slogdet judges the declared log-det (``verdicts.flow_jacobian``):
a wrong gradient inside the flow is named as ``check`` names it and never
blamed on the log-det; a wrong log-det beside a Jacobian the differences
vouch for is blamed, at the line that computes it. Every number here is
checked against a closed form or a central-difference Jacobian computed in
this file; every line number is read from the fixture.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import gradcli as api
from tests.conftest import central_jacobians, fixture, gradcli, line_of, sample

#: The coupling both new fixtures share: s = tanh(x_a A + a), t = x_a B + b.
A = np.array([[0.6, -0.4], [0.3, 0.8]])
a = np.array([0.1, -0.2])
B = np.array([[0.5, 0.2], [-0.7, 0.4]])
b = np.array([0.3, 0.1])
X = np.array([[0.2, -0.5, 0.7, 1.1], [-0.9, 0.4, -0.3, 0.6], [1.3, 0.8, -1.2, -0.4]])


def where(name: str, text: str) -> str:
    """``tests/models/NAME:LINE`` of the first line of fixture ``name`` holding ``text``."""
    return f"tests/models/{name}:{line_of(fixture(name), text)}"


def coupling(x):
    """(z, s): the coupling's output and its log-scale, in numpy."""
    xa, xb = x[:, :2], x[:, 2:]
    s = np.tanh(xa @ A + a)
    return np.concatenate([xa, xb * np.exp(s) + xa @ B + b], axis=1), s


def test_a_wrong_custom_gradient_is_blamed_and_the_log_det_is_not():
    """z -> z + tanh(z) / 2 after the coupling, by a custom gradient giving
    1 + (1 - tanh z) / 2 for 1 + (1 - tanh(z)^2) / 2. The log-det, right,
    agrees with the central-difference Jacobian; the autodiff Jacobian's
    slogdet is the closed form of the wrong slope."""
    name = "logdet_wrong_custom_gradient.py"
    run = gradcli("logdet", fixture(name), "--json")
    assert run.exit_code == 1, run
    result = run.result
    z, s = coupling(X)
    truth = s.sum(axis=1) + np.log(1 + 0.5 * (1 - np.tanh(z) ** 2)).sum(axis=1)
    wrong = s.sum(axis=1) + np.log(1 + 0.5 * (1 - np.tanh(z))).sum(axis=1)
    examples = result["examples"]
    assert (result["n_failing"], result["n_jacobian_wrong"], result["n_not_judged"]) == (0, 3, 0), run
    assert [e["jacobian"] for e in examples] == ["wrong"] * 3
    assert [e["verdict"] for e in examples] == ["pass"] * 3 and all(e["ok"] is True for e in examples)
    assert [e["against"] for e in examples] == ["finite differences"] * 3
    np.testing.assert_allclose([e["declared"] for e in examples], truth, rtol=1e-12)
    np.testing.assert_allclose([e["logabsdet"] for e in examples], truth, rtol=1e-8)
    np.testing.assert_allclose([e["autodiff_logabsdet"] for e in examples], wrong, rtol=1e-12)
    culprit = result["culprit"]
    assert culprit["definition"] == where(name, "def soft_shift"), culprit
    assert culprit["site"]["location"] == where(name, "return soft_shift("), culprit

    text = gradcli("logdet", fixture(name)).stdout
    assert "FAIL the autodiff Jacobian is wrong at 3 of 3 examples" in text
    assert "a gradient inside the flow is wrong, not log_det_jacobian" in text
    assert f"culprit: tf.custom_gradient soft_shift (IdentityN 'IdentityN') at {where(name, 'return soft_shift(')}" \
        f", defined at {where(name, 'def soft_shift')}" in text
    assert "log_det_jacobian agrees with slogdet of the Jacobian at all 3 examples" in text
    assert "FAIL log_det_jacobian" not in text and "mismatch" not in text


def test_a_wrong_log_det_beside_right_gradients_is_blamed_at_its_line():
    """The bijector declares sum(exp(s)) for log|det J| = sum(s)."""
    name = "logdet_wrong_log_det.py"
    run = gradcli("logdet", fixture(name), "--json")
    assert run.exit_code == 1, run
    result = run.result
    _, s = coupling(X)
    examples = result["examples"]
    assert (result["n_failing"], result["n_jacobian_wrong"]) == (3, 0), run
    assert [e["jacobian"] for e in examples] == ["agrees"] * 3
    assert [e["verdict"] for e in examples] == ["mismatch"] * 3
    np.testing.assert_allclose([e["logabsdet"] for e in examples], s.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose([e["declared"] for e in examples], np.exp(s).sum(axis=1), rtol=1e-12)
    assert result["culprit"] is None
    site = result["log_det_site"]
    assert site["location"] == where(name, "return tf.reduce_sum(tf.exp(s)"), site
    assert "Coupling._forward_log_det_jacobian" in site["description"], site
    assert result["log_det_definition"] == where(name, "def _forward_log_det_jacobian"), result

    text = gradcli("logdet", fixture(name)).stdout
    assert "the autodiff Jacobian agrees with central differences of the flow along 3 random directions" in text
    assert "FAIL log_det_jacobian disagrees at 3 of 3 examples" in text
    assert "culprit: log_det_jacobian as computed by Sum in Coupling._forward_log_det_jacobian" in text
    assert f"at {where(name, 'return tf.reduce_sum(tf.exp(s)')}, in the function defined at " \
        f"{where(name, 'def _forward_log_det_jacobian')}" in text


@pytest.mark.parametrize("name, output, declared, text", [
    # a model file's own function: the line that computes it
    ("diag_flow_bad_ldj.py", "log_det_jacobian", "log_det_jacobian", "return tf.tanh(x[:, 0])"),
    # a bijector as the model: the inverse's method, in the helper module that defines it
    ("tfp_bijector_wrong_inverse_log_det.py", "inverse", "inverse_log_det_jacobian",
     "return tf.math.log(tf.cosh(tf.asinh(y)))"),
])
def test_the_line_computing_a_wrong_log_det_is_named_wherever_it_is_written(name, output, declared, text):
    result = api.logdet(fixture(name))
    part = result.inverse if output == "inverse" else result
    helper = "_tfp_flows.py" if "tfp" in name else name
    assert part.n_failing == part.batch and part.n_jacobian_wrong == 0, part
    assert part.log_det_site.location == where(helper, text), part.log_det_site
    assert declared == part.declared_name
    if output == "inverse":
        assert "WrongInverseLogDet._inverse_log_det_jacobian" in part.log_det_site.description
        at = line_of(fixture(helper), text)
        with open(fixture(helper)) as handle:  # the def of the method around that line
            lines = handle.read().splitlines()[:at]
        defined = max(i for i, line in enumerate(lines, start=1) if "def _inverse_log_det_jacobian" in line)
        assert part.log_det_definition == f"tests/models/{helper}:{defined}"
        assert result.log_det_site is None  # the forward log-det is right: nothing blamed
    else:  # log|det J| = tanh(x0) + log 2, closed form
        x = np.array([[0.1, 0.2, 0.3], [-1.0, 0.5, 2.0]])
        np.testing.assert_allclose([e.logabsdet for e in part.examples], np.tanh(x[:, 0]) + math.log(2), rtol=1e-12)


def test_a_right_flow_still_passes_with_the_same_numbers():
    """realnvp_flow.py: slogdet as before (of the autodiff Jacobian, which the
    differences vouch for), against numpy's slogdet of central differences
    of the flow computed here."""
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location("realnvp_flow", sample("realnvp_flow.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.random.default_rng(7).standard_normal((5, 4))
    result = api.logdet(sample("realnvp_flow.py"), set={"x": x})
    assert result.ok and result.exit_code == 0, result
    sign, truth = np.linalg.slogdet(central_jacobians(lambda v: module.model(tf.constant(v)).numpy(), x, 1e-5))
    examples = result.examples
    assert [e.jacobian for e in examples] == ["agrees"] * 5 and [e.against for e in examples] == ["autodiff"] * 5
    assert max(e.jacobian_rel_error for e in examples) < 1e-8
    assert result.n_jacobian_wrong == result.n_not_judged == 0 and result.culprit is result.log_det_site is None
    np.testing.assert_allclose([e.logabsdet for e in examples], truth, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose([e.sign for e in examples], sign)
    assert [e.logabsdet for e in examples] == [e.autodiff_logabsdet for e in examples]
    np.testing.assert_allclose([e.declared for e in examples], truth, rtol=1e-8, atol=1e-8)


def test_a_log_det_no_trustworthy_jacobian_can_judge_is_not_judged_and_not_blamed():
    """The judging rule alone: the autodiff Jacobian refuted, and its central
    differences singular (example 0) or with an error estimate that moves
    log|det| by more than a tenth (example 1): not judged, never a mismatch."""
    from gradcli.results import Tolerance
    from gradcli.verdicts import flow_jacobian

    tol = Tolerance(rtol=1e-6, atol=1e-9, rule="test", resolve=0.1)
    found = flow_jacobian.Agreement(status=["wrong", "wrong", "wrong"], rel_error=np.array([0.5, 0.5, 0.5]))
    identity = np.eye(2)
    differenced = {
        0: (np.diag([1.0, 0.0]), np.zeros((2, 2))),
        1: (identity, np.full((2, 2), 0.1)),  # ||J^-1||_F ||E||_F = sqrt(2) * 0.2, times 2
        2: (2 * identity, np.full((2, 2), 1e-10)),
    }
    declared = np.array([5.0, 5.0, 2 * math.log(2)])
    examples = flow_jacobian.judge(declared, np.ones(3), np.zeros(3), found, differenced, tol)
    assert [e.ok for e in examples] == [None, None, True]
    assert [e.verdict for e in examples] == ["not judged", "not judged", "pass"]
    assert examples[2].logabsdet == pytest.approx(2 * math.log(2), rel=1e-15)
    lines = flow_jacobian.log_det_findings(examples, 3, "log_det_jacobian")
    assert not any(line.startswith("FAIL") for line in lines), lines
    assert "log_det_jacobian is not judged at examples 0, 1" in lines[-1]


def test_the_directions_rule_tells_a_wrong_jacobian_from_noisy_differences():
    """The directions rule alone, on products J v of 2 directions and 3
    examples of R^2: example 0 agrees to 1e-12; example 1 is off by 1e-3 in
    one element, beyond rtol 1e-6 and its error estimate; example 2 agrees
    within an error estimate half the size of the quotients (past resolve,
    0.1): unresolved, never wrong. A NaN product is wrong."""
    from gradcli.results import Tolerance
    from gradcli.verdicts import flow_jacobian

    tol = Tolerance(rtol=1e-6, atol=1e-9, rule="test", resolve=0.1)
    numeric = np.array([[[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]], [[-2.0, 1.0], [1.0, 1.0], [0.5, -0.5]]])
    analytic = numeric * (1 + 1e-12)
    analytic[1, 1, 0] += 1e-3
    error = np.full_like(numeric, 1e-12)
    error[:, 2, :] = 0.5 * np.abs(numeric[:, 2, :])
    found = flow_jacobian.agreement(analytic, numeric, error, np.zeros_like(numeric), tol)
    assert found.status == ["agrees", "wrong", "unresolved"]
    assert found.rel_error[1] == pytest.approx(1e-3 / np.hypot(1.0 + 1e-3, 1.0), rel=1e-6)  # by the larger norm
    analytic[0, 0, 1] = np.nan
    assert flow_jacobian.agreement(analytic, numeric, error, np.zeros_like(numeric), tol).status[0] == "wrong"
