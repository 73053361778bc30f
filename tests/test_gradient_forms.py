"""Every form TensorFlow returns a derivative in, through every command.

The forms (``numerics.autodiff.dense``): ``tf.IndexedSlices`` (``tf.gather``,
and a custom gradient returning its own), the variables of a
``tf.custom_gradient`` (``grad(dy, variables=None)``, the weight read as a
variable: ``numerics.autodiff.sources_of``). Expected numbers are closed forms
(``tests/models/_gradient_forms.py``), never gradcli's own output.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import FIXTURES, check_json, fixture, gradcli, line_of, pairs

sys.path.insert(0, str(FIXTURES))
import _gradient_forms as forms  # noqa: E402


def variable_gradient(scale=1.0):
    """d sum(tanh(x w)) / dw, and the full Jacobian d tanh(x w)[i, j] / dw[k]."""
    y = np.tanh(forms.X * forms.W0)
    local = (1 - y**2) * forms.X  # dy[i, j] / dw[j]
    jacobian = np.zeros(forms.X.shape + forms.W0.shape)
    for j in range(forms.W0.size):
        jacobian[:, j, j] = local[:, j]
    return scale * local.sum(axis=0), jacobian


@pytest.mark.parametrize("mode", ["full", "fast"])
@pytest.mark.parametrize("name", ["forms_gather.py", "forms_gather_custom.py", "forms_variable.py"])
def test_right_gradients_in_every_form_pass(name, mode):
    run, document = check_json(fixture(name), "--mode", mode)
    assert run.exit_code == 0, run
    assert all(p["verdict"] == "pass" for p in pairs(document).values()), run


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_indexed_slices_gradient_fails_with_its_culprit(mode):
    run, document = check_json(fixture("forms_gather_custom_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(document)[("table", "output")]
    assert pair["verdict"] == "mismatch", run
    if mode == "full":  # analytic = 1.5 x the closed form, numeric = the closed form
        worst = pair["worst"]
        assert worst["analytic"] == pytest.approx(1.5 * worst["numeric"], rel=1e-7)
    culprit = pair["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient lookup", culprit
    defined = line_of(FIXTURES / "_gradient_forms.py", "def lookup(table, idx)")
    assert culprit["definition"].endswith(f"_gradient_forms.py:{defined}"), culprit


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_variable_gradient_of_a_custom_gradient_fails_on_that_weight(mode):
    run, document = check_json(fixture("forms_variable_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    found = pairs(document)
    assert found[("scaled/w", "output")]["verdict"] == "mismatch", run
    assert found[("x", "output")]["verdict"] == "pass", run  # its input gradient is right
    if mode == "full":
        worst = found[("scaled/w", "output")]["worst"]
        assert worst["analytic"] == pytest.approx(2.0 * worst["numeric"], rel=1e-7)


def test_vjp_through_gather_is_the_closed_form(tmp_path):
    run = gradcli("vjp", fixture("forms_gather.py"), "--save", tmp_path / "v.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")["table"], forms.gather_gradient(), rtol=1e-12)


def test_jacobian_and_jvp_through_gather_are_the_closed_form(tmp_path):
    run = gradcli("jacobian", fixture("forms_gather.py"), "--save", tmp_path / "j.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(
        np.load(tmp_path / "j.npz")["output/table"], forms.gather_gradient(), rtol=1e-12)
    tangent = np.zeros_like(forms.TABLE)
    tangent[2, 1] = 1.0
    run = gradcli("jvp", fixture("forms_gather.py"), "--tangent", f"table={tangent.tolist()}",
                  "--save", tmp_path / "t.npz")
    assert run.exit_code == 0, run
    assert float(np.load(tmp_path / "t.npz")["output"]) == pytest.approx(
        forms.gather_gradient()[2, 1], rel=1e-12)


def test_vjp_and_jacobian_of_a_custom_gradients_variable_are_the_users_rule(tmp_path):
    run = gradcli("vjp", fixture("forms_variable_wrong.py"), "--wrt", "scaled/w",
                  "--save", tmp_path / "v.npz")
    assert run.exit_code == 0, run  # what the user's rule gives: 2x the true gradient
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")["scaled/w"], variable_gradient(2.0)[0], rtol=1e-12)
    run = gradcli("jacobian", fixture("forms_variable.py"), "--wrt", "scaled/w", "--save", tmp_path / "j.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "j.npz")["output/scaled/w"], variable_gradient()[1], rtol=1e-12)


def test_second_order_through_gather_passes():
    run, document = check_json(fixture("forms_gather.py"), "--order", "2")
    assert run.exit_code == 0, run


def test_every_derivative_is_taken_through_the_one_seam():
    """``GradientTape.gradient``, ``tf.gradients`` and ``ForwardAccumulator`` are
    called in ``numerics/autodiff.py`` alone: a second path that converts
    TensorFlow's results its own way is where an ``IndexedSlices`` crashed the
    proof. Calls are found in the syntax tree (docstrings may name them)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "gradcli"

    def derivative_call(node) -> bool:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return False
        owner = ast.unparse(node.func.value)
        return (
            (node.func.attr == "gradient" and "tape" in owner)
            or (node.func.attr == "gradients" and owner == "tf")
            or node.func.attr == "ForwardAccumulator"
        )

    found = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py") if path.name != "autodiff.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if derivative_call(node)
    ]
    assert found == [], found


def test_forward_mode_unavailable_through_an_op_is_a_named_warning_not_a_mismatch():
    run, document = check_json(fixture("forward_unavailable_resize.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass", pair
    line = line_of(fixture("forward_unavailable_resize.py"), "tf.image.resize(")
    (warning,) = [w for w in pair["warnings"] if w.startswith("forward mode unavailable")]
    assert warning.startswith(
        f"forward mode unavailable through ResizeBilinear at tests/models/forward_unavailable_resize.py:{line}:"
    ), warning


def test_forward_mode_through_a_tf_function_with_a_while_loop_is_checked(tmp_path):
    run, document = check_json(fixture("forward_while_function.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass" and not any("forward mode" in w for w in pair["warnings"]), pair
    x = np.linspace(-1.0, 1.0, 48).reshape(6, 8)
    derivative, y = np.ones_like(x), x
    for _ in range(3):
        derivative, y = derivative * 1.5 * np.cos(y), 1.5 * np.sin(y)
    tangent = np.zeros_like(x)
    tangent[2, 3] = 1.0
    run = gradcli("jvp", fixture("forward_while_function.py"), "--tangent", f"x={tangent.tolist()}",
                  "--save", tmp_path / "t.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "t.npz")["output"], derivative * tangent, rtol=1e-12, atol=1e-15)


def test_forward_mode_of_a_tf_function_is_checked_traced_and_eagerly():
    """Closed form: the eager JVP along u is <v, x u> (the forward ops'
    derivative x), finite differences give <v, 2x u>: the reported forward
    value is half the numeric one."""
    run, document = check_json(fixture("forward_custom_in_function.py"))
    assert run.exit_code == 1, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "mismatch", pair
    assert "with the model's tf.functions run eagerly" in pair["explanation"], pair
    forward, numeric = pair["forward_probe"]
    assert forward == pytest.approx(0.5 * numeric, rel=1e-7)
    assert pair["culprit"]["site"]["description"].startswith("tf.custom_gradient square: forward mode differentiates")
