"""Complex outputs, checked as their real and imaginary parts
(``structure.split_complex_outputs``), against a real 2n-dimensional
reference built by hand (``tests/models/_complex_square.py``: f(z) = z^2).

With z = x + iy: Re f = x^2 - y^2, Im f = 2xy. For a real loss
L = <a, Re f> + <b, Im f>, TensorFlow's gradient (its convention) is
dL/dx + i dL/dy = (2x a + 2y b) + i(-2y a + 2x b).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import FIXTURES, check_json, fixture, gradcli, pairs

sys.path.insert(0, str(FIXTURES))
from _complex_square import Z  # noqa: E402

X, Y = Z.real, Z.imag


def test_a_right_rule_passes_on_every_part():
    run, document = check_json(fixture("complex_output.py"))
    assert run.exit_code == 0, run
    found = pairs(document)
    assert set(found) == {(i, o) for i in ("z.real", "z.imag") for o in ("output.real", "output.imag")}
    assert all(p["verdict"] == "pass" for p in found.values())
    (model,) = document["result"]["models"]
    assert any(n.startswith("output output is complex: checked as real and imaginary parts") for n in model["notes"])


def test_a_rule_missing_the_conjugate_fails_the_cross_parts_with_the_closed_form():
    run, document = check_json(fixture("complex_output_wrong.py"))
    assert run.exit_code == 1, run
    found = pairs(document)
    assert found[("z.real", "output.real")]["verdict"] == "pass"
    assert found[("z.imag", "output.imag")]["verdict"] == "pass"
    wrong = found[("z.real", "output.imag")]
    assert wrong["verdict"] == "mismatch"
    i = wrong["worst"]["output_index"][0]
    assert wrong["worst"]["numeric"] == pytest.approx(2 * Y[i], rel=1e-7)  # d Im f / dx
    assert wrong["worst"]["analytic"] == pytest.approx(-2 * Y[i], rel=1e-9)  # the conjugate missed


@pytest.mark.parametrize("name, sign", [("complex_output.py", 1.0), ("complex_output_wrong.py", -1.0)])
def test_vjp_with_a_complex_seed_is_the_users_rule(tmp_path, name, sign):
    a, b = np.array([1.0, -0.5, 2.0]), np.array([0.25, 1.5, -1.0])
    run = gradcli("vjp", fixture(name), "--cotangent", f"output.real={a.tolist()}",
                  "--cotangent", f"output.imag={b.tolist()}", "--save", tmp_path / "g.npz")
    assert run.exit_code == 0, run
    saved = np.load(tmp_path / "g.npz")
    # Right: (2x a + 2y b) + i(-2y a + 2x b); missing the conjugate flips the y terms.
    np.testing.assert_allclose(saved["z.real"], 2 * X * a + sign * 2 * Y * b, rtol=1e-12)
    np.testing.assert_allclose(saved["z.imag"], -sign * 2 * Y * a + 2 * X * b, rtol=1e-12)


def test_forward_still_shows_the_complex_output_whole():
    run = gradcli("forward", fixture("complex_output.py"), "--json")
    assert run.exit_code == 0, run
    (output,) = run.result["outputs"]
    assert output["dtype"] == "complex128"


def test_a_complex_value_set_on_a_complex_input_sets_both_parts(tmp_path):
    """``--set z=@z.npy`` with a complex array: f = |z|^2 (complex_input.py)
    has the gradient 2x + 2iy, read back as the two parts."""
    z = np.array([1 + 1j, 2 - 1j, 0.5j])
    np.save(tmp_path / "z.npy", z)
    run = gradcli("vjp", fixture("complex_input.py"), "--set", f"z=@{tmp_path / 'z.npy'}",
                  "--save", tmp_path / "g.npz")
    assert run.exit_code == 0, run
    saved = np.load(tmp_path / "g.npz")
    np.testing.assert_allclose(saved["z.real"], 2 * z.real, rtol=1e-12)
    np.testing.assert_allclose(saved["z.imag"], 2 * z.imag, rtol=1e-12)
