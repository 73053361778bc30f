"""Issue 31, items 2 and 3: nested values (dicts, lists, tuples of arrays, as
jax's pytrees) and tf.SparseTensor inputs, flattened at load time to leaves
named by path (``params.w``, ``pair.0``, ``x.values``).

Truth: the closed forms in each fixture's docstring.
* ``nest_pytree.py``: y = w * x + b elementwise, loss = sum(y**2) / 2, at
  w = [0.5, -1, 2], b = [0.1, 0.2, -0.3], x = [1, 2, -1.5]: dy/dw = diag(x),
  dy/db = I, dy/dx = diag(w); its wrong twin's gradient for b is 2 I.
* ``nest_tuple.py``: p = a * b, q = (a + b, sin(a) - b) at a = [1, -2], b = [3, 0.5].
* ``sparse_input.py``: y[r] = sum over row r's stored (c, v) of v**2 w[c], at
  values v = [1, -2, 3] stored at (0, 0), (0, 2), (1, 1) and w = [1, 0.5, -1]:
  dy/dv = [[2 v0 w0, 2 v1 w2, 0], [0, 0, 2 v2 w1]] = [[2, 4, 0], [0, 0, 3]],
  dy/dw = [[1, 0, 4], [0, 9, 0]]; its wrong twin's custom gradient is v dy.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli
from tests.conftest import fixture, gradcli as run_cli, line_of

PYTREE, PYTREE_WRONG = fixture("nest_pytree.py"), fixture("nest_pytree_wrong.py")
SPARSE, SPARSE_WRONG = fixture("sparse_input.py"), fixture("sparse_input_wrong.py")
W, B, X = np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.2, -0.3]), np.array([1.0, 2.0, -1.5])
V, WS = np.array([1.0, -2.0, 3.0]), np.array([1.0, 0.5, -1.0])
SPARSE_NOTE = "x is sparse: differentiated through its 3 stored values (x.values), indices fixed"


def pairs_of(run):
    (model,) = run.result["models"]
    return {(p["input"], p["output"]): p for p in model["pairs"]}


def named(arrays) -> dict:
    return {a["name"]: np.asarray(a["values"]) for a in arrays}


def blocks(run) -> dict:
    return {(b["output"], b["input"]): np.asarray(b["values"]) for b in run.result["blocks"]}


# --- nested inputs and outputs through every command -----------------------------------


def test_a_pytree_model_is_checked_leaf_by_leaf_and_passes():
    run = run_cli("check", PYTREE, "--json")
    assert run.exit_code == 0, run
    found = pairs_of(run)
    assert set(found) == {(i, o) for i in ("params.w", "params.b", "x") for o in ("loss", "parts.y")}
    assert not any(p["failed"] for p in found.values())


def test_a_pytree_gradient_twice_off_for_params_b_fails_naming_params_b():
    run = run_cli("check", PYTREE_WRONG, "--json")
    assert run.exit_code == 1, run
    found = pairs_of(run)
    assert {k for k, p in found.items() if p["failed"]} == {("params.b", "loss"), ("params.b", "parts.y")}
    # d y_i / d b_i = 1 against the custom gradient's 2; d loss / d b = y = w x + b
    worst = found[("params.b", "parts.y")]["worst"]
    assert worst["analytic"] == pytest.approx(2.0) and worst["numeric"] == pytest.approx(1.0, rel=1e-8)
    by_element = {tuple(e["input_index"]): e for e in found[("params.b", "loss")]["failing"]}
    y = W * X + B
    for i in range(3):
        assert by_element[(i,)]["numeric"] == pytest.approx(y[i], rel=1e-8)
        assert by_element[(i,)]["analytic"] == pytest.approx(2 * y[i], rel=1e-12)
    culprit = found[("params.b", "loss")]["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient affine"
    twins = fixture("_value_twins.py")
    assert culprit["definition"] == f"tests/models/_value_twins.py:{line_of(twins, 'def affine')}"


def test_the_text_report_and_junit_name_the_leaf(tmp_path):
    xml = tmp_path / "out.xml"
    run = run_cli("check", PYTREE_WRONG, "--junit-xml", xml)
    assert run.exit_code == 1, run
    assert "FAIL params.b -> loss: mismatch" in run.stdout and "FAIL params.b -> parts.y: mismatch" in run.stdout
    assert "FAIL params.w" not in run.stdout and "FAIL x" not in run.stdout
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): c.find("failure") is not None for c in ET.parse(xml).iter("testcase")}
    assert cases == {f"{i}/{o}": i == "params.b" for i in ("params.w", "params.b", "x") for o in ("loss", "parts.y")}


def test_vjp_takes_cotangents_by_output_path_and_saves_by_input_path(tmp_path):
    saved = tmp_path / "g.npz"
    c = np.array([1.0, 2.0, 3.0])
    run = run_cli("vjp", PYTREE, "--cotangent", "parts.y=[1,2,3]", "--cotangent", "loss=0",
                  "--json", "--save", saved)
    assert run.exit_code == 0, run
    grads = named(run.result["gradients"])
    np.testing.assert_allclose(grads["params.w"], c * X, rtol=1e-15)
    np.testing.assert_allclose(grads["params.b"], c, rtol=1e-15)
    np.testing.assert_allclose(grads["x"], c * W, rtol=1e-15)
    with np.load(saved) as data:
        assert sorted(data.files) == ["params.b", "params.w", "x"]
        np.testing.assert_allclose(data["params.w"], c * X, rtol=1e-15)
    # the saved keys are VALUEs for the next call: y = w x + b at w = 1, x = c w
    run = run_cli("forward", PYTREE, "--set", "params.w=1", "--set", f"x=@{saved}:x", "--json")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(named(run.result["outputs"])["parts.y"], c * W + B, rtol=1e-15)


def test_jvp_takes_tangents_by_input_path():
    run = run_cli("jvp", PYTREE, "--tangent", "params.b=1", "--tangent", "params.w=0", "--tangent", "x=0", "--json")
    assert run.exit_code == 0, run
    out = named(run.result["outputs"])
    np.testing.assert_allclose(out["parts.y"], np.ones(3), rtol=1e-15)
    np.testing.assert_allclose(out["loss"], np.sum(W * X + B), rtol=1e-14)  # d loss / d b . 1 = sum(y)


def test_wrt_a_nested_input_stands_for_its_leaves():
    run = run_cli("jacobian", PYTREE, "--wrt", "params", "--json")
    assert run.exit_code == 0, run
    found = blocks(run)
    assert {i for _, i in found} == {"params.w", "params.b"}
    np.testing.assert_allclose(found[("parts.y", "params.w")], np.diag(X), rtol=1e-15)
    np.testing.assert_allclose(found[("parts.y", "params.b")], np.eye(3), rtol=1e-15)
    np.testing.assert_allclose(found[("loss", "params.w")], (W * X + B) * X, rtol=1e-14)


def test_hessian_by_leaf():
    # loss = sum((w x + b)**2) / 2: d2/dw2 = x**2, d2/dw db = x, d2/db2 = 1 (each diagonal)
    run = run_cli("hessian", PYTREE, "--wrt", "params", "--cotangent", "loss=1", "--cotangent", "parts.y=0", "--json")
    assert run.exit_code == 0, run
    assert [b["name"] for b in run.result["blocks"]] == ["params.w", "params.b"]
    H = np.asarray(run.result["hessian"])
    expected = np.block([[np.diag(X**2), np.diag(X)], [np.diag(X), np.eye(3)]])
    np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-14)


def test_tuples_in_and_out_are_named_by_index():
    run = run_cli("jacobian", fixture("nest_tuple.py"), "--json")
    assert run.exit_code == 0, run
    found = blocks(run)
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    assert set(found) == {(o, i) for o in ("parts.p", "parts.q.0", "parts.q.1") for i in ("pair.0", "pair.1")}
    np.testing.assert_allclose(found[("parts.p", "pair.0")], np.diag(b), rtol=1e-15)
    np.testing.assert_allclose(found[("parts.q.1", "pair.0")], np.diag(np.cos(a)), rtol=1e-15)
    np.testing.assert_allclose(found[("parts.q.1", "pair.1")], -np.eye(2), rtol=1e-15)


def test_a_nested_dict_output_is_flattened_not_refused():
    # edge_nested_dict.py: loss = sum(x**2), parts = {a: x, b: 2x} at x = [1, 2]
    run = run_cli("forward", fixture("edge_nested_dict.py"), "--json")
    assert run.exit_code == 0, run
    out = named(run.result["outputs"])
    assert list(out) == ["loss", "parts.a", "parts.b"]
    np.testing.assert_array_equal(out["parts.b"], [2.0, 4.0])
    assert run_cli("check", fixture("edge_nested_dict.py")).exit_code == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "params=1"], "--set params: a nested input; set its leaves (params.w, params.b)"),
        (["--wrt", "params.z"], "--wrt: unknown input 'params.z' (known: params.w, params.b, x)"),
        (["--cotangent", "parts=1"], "unknown output for --cotangent 'parts' (known: loss, parts.y)"),
    ],
)
def test_names_that_are_not_leaves_are_usage_errors(args, message):
    run = run_cli("vjp" if args[0] == "--cotangent" else "check", PYTREE, *args)
    assert run.exit_code == 2, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), run
    assert lines[0] == f"Error: {message}"


# --- sparse inputs ------------------------------------------------------------------------


def test_a_sparse_input_is_differentiated_through_its_values_and_passes():
    run = run_cli("check", SPARSE, "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    assert set(pairs_of(run)) == {("x.values", "output"), ("w", "output")}
    assert SPARSE_NOTE in model["notes"]
    text = run_cli("check", SPARSE)
    assert f"note: {SPARSE_NOTE}" in text.stdout


def test_a_wrong_custom_gradient_on_sparse_values_fails_naming_x_values():
    run = run_cli("check", SPARSE_WRONG, "--json")
    assert run.exit_code == 1, run
    found = pairs_of(run)
    assert [k for k, p in found.items() if p["failed"]] == [("x.values", "output")]
    numeric = np.array([[2.0, 4.0, 0.0], [0.0, 0.0, 3.0]])
    for e in found[("x.values", "output")]["failing"]:
        index = tuple(e["output_index"] + e["input_index"])
        assert e["numeric"] == pytest.approx(numeric[index], rel=1e-8)
        assert e["analytic"] == pytest.approx(numeric[index] / 2, rel=1e-12)
    assert found[("x.values", "output")]["culprit"]["site"]["description"] == "tf.custom_gradient square"


def test_sparse_jacobian_and_set_by_values():
    run = run_cli("jacobian", SPARSE, "--json")
    assert run.exit_code == 0, run
    found = blocks(run)
    np.testing.assert_allclose(found[("output", "x.values")], [[2, 4, 0], [0, 0, 3]], rtol=1e-15)
    np.testing.assert_allclose(found[("output", "w")], [[1, 0, 4], [0, 9, 0]], rtol=1e-15)
    assert SPARSE_NOTE in run.result["notes"]
    # new values, same pattern: dy/dv = 2 v w[c] at v = [2, 1, -1]
    run = run_cli("jacobian", SPARSE, "--set", "x.values=[2,1,-1]", "--wrt", "x", "--json")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(blocks(run)[("output", "x.values")], [[4, -2, 0], [0, 0, -1]], rtol=1e-15)
    bad = run_cli("forward", SPARSE, "--set", "x.values=[1,2]")
    assert bad.exit_code == 2 and bad.stderr.strip() == "Error: --set x.values has shape [2], expected [3] (or a scalar)"


def test_a_sparse_output_is_compared_in_its_dense_form():
    # edge_sparse_output.py: tf.sparse.from_dense(x * x) at x = [1, 0, 2]
    path = fixture("edge_sparse_output.py")
    run = run_cli("jacobian", path, "--json")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(blocks(run)[("output", "x")], np.diag([2.0, 0.0, 4.0]), rtol=1e-15)
    check = run_cli("check", path, "--json")
    assert check.exit_code == 0, check
    assert "output output is sparse: compared in its dense form (tf.sparse.to_dense)" in check.result["models"][0]["notes"]


# --- the Python API ---------------------------------------------------------------------


def _affine(factor_b: float):
    import tensorflow as tf

    @tf.custom_gradient
    def affine(params, x):
        def grad(dy):
            return {"w": dy * x, "b": factor_b * dy}, dy * params["w"]

        return params["w"] * x + params["b"], grad

    return affine


@pytest.mark.parametrize("factor_b, ok", [(1.0, True), (2.0, False)])
def test_python_api_checks_a_pytree(factor_b, ok):
    f = _affine(factor_b)
    result = gradcli.check(f, {"params": {"w": W, "b": B}, "x": X})
    assert result.exit_code == (0 if ok else 1)
    (model,) = result.models
    failed = {(p.input, p.output) for p in model.pairs if p.failed}
    assert failed == (set() if ok else {("params.b", "output")})
    jac = gradcli.jacobian(f, ({"w": W, "b": B}, X))  # positional: (params, x)
    found = {(b.output, b.input): b.values for b in jac.blocks}
    np.testing.assert_allclose(found[("output", "params.b")], factor_b * np.eye(3), rtol=1e-15)
    np.testing.assert_allclose(found[("output", "params.w")], np.diag(X), rtol=1e-15)


@pytest.mark.parametrize("factor, ok", [(2.0, True), (3.0, False)])
def test_python_api_checks_a_sparse_input(factor, ok):
    import tensorflow as tf

    @tf.custom_gradient
    def square(v):
        return v * v, lambda dy: factor * v * dy

    def f(x):
        return tf.sparse.reduce_sum(tf.SparseTensor(x.indices, square(x.values), x.dense_shape), axis=0)

    x = tf.SparseTensor([[0, 1], [2, 0]], V[:2], [3, 2])
    result = gradcli.check(f, x)
    assert result.exit_code == (0 if ok else 1)
    (model,) = result.models
    assert [p.input for p in model.pairs] == ["x.values"]
    assert model.notes[0] == "x is sparse: differentiated through its 2 stored values (x.values), indices fixed"
    # y = column sums of the squares: y[0] = v1**2, y[1] = v0**2
    vjp = gradcli.vjp(f, x, {"output": [1.0, 10.0]})
    np.testing.assert_allclose(vjp.gradients[0].values, factor * V[:2] * [10.0, 1.0], rtol=1e-15)


def test_two_paths_that_spell_one_name_are_refused():
    import tensorflow as tf

    from gradcli.errors import ModelError

    with pytest.raises(ModelError, match=r"input 'a\.b' is named twice by the nesting of `inputs`; rename a key"):
        gradcli.forward(lambda a, **k: tf.reduce_sum(a["b"]), {"a": {"b": X}, "a.b": X})


def test_a_list_of_numbers_is_one_array_and_a_list_of_arrays_nests():
    one = gradcli.jacobian(lambda x: 3.0 * x, {"x": [np.float64(1.0), 2.0]})
    assert [(b.output, b.input) for b in one.blocks] == [("output", "x")]
    np.testing.assert_allclose(one.blocks[0].values, 3.0 * np.eye(2), rtol=1e-15)
    a, b = np.array([2.0, -1.0]), np.array([3.0, 4.0])
    nested = gradcli.jacobian(lambda x: x[0] * x[1], {"x": [a, b]})
    found = {(k.output, k.input): k.values for k in nested.blocks}
    assert set(found) == {("output", "x.0"), ("output", "x.1")}
    np.testing.assert_allclose(found[("output", "x.0")], np.diag(b), rtol=1e-15)
    np.testing.assert_allclose(found[("output", "x.1")], np.diag(a), rtol=1e-15)


# --- complex inputs (issue 31, item 1) ---------------------------------------------------

Z = np.array([1.0 + 2.0j, -0.5 + 1.0j, 3.0 - 1.0j])
COMPLEX_NOTE = (
    "z is complex: checked as its real and imaginary parts (z.real, z.imag), TensorFlow's "
    "convention: the gradient of a real loss f is df/dx + i df/dy"
)


def test_a_complex_input_is_checked_as_its_real_and_imaginary_parts():
    # |z|**2 = x**2 + y**2: TensorFlow's gradient 2x + 2iy; by part diag(2x), diag(2y)
    run = run_cli("jacobian", fixture("complex_input.py"), "--json")
    assert run.exit_code == 0, run
    found = blocks(run)
    np.testing.assert_allclose(found[("output", "z.real")], np.diag(2 * Z.real), rtol=1e-15)
    np.testing.assert_allclose(found[("output", "z.imag")], np.diag(2 * Z.imag), rtol=1e-15)
    check = run_cli("check", fixture("complex_input.py"), "--json")
    assert check.exit_code == 0, check
    assert COMPLEX_NOTE in check.result["models"][0]["notes"]


def test_a_conjugated_complex_gradient_fails_on_the_imaginary_part_only():
    run = run_cli("check", fixture("complex_input_wrong.py"), "--json")
    assert run.exit_code == 1, run
    found = pairs_of(run)
    assert [k for k, p in found.items() if p["failed"]] == [("z.imag", "output")]
    for e in found[("z.imag", "output")]["failing"]:
        (k,) = e["input_index"]
        assert e["numeric"] == pytest.approx(2 * Z.imag[k], rel=1e-8)
        assert e["analytic"] == pytest.approx(-2 * Z.imag[k], rel=1e-12)


def test_python_api_checks_a_complex_input_and_names_its_parts():
    import tensorflow as tf

    # Re(z * z) = x**2 - y**2: d/dx = 2x, d/dy = -2y
    result = gradcli.check(lambda z: tf.math.real(z * z), {"z": Z})
    assert result.exit_code == 0
    (model,) = result.models
    assert [p.input for p in model.pairs] == ["z.real", "z.imag"]
    vjp = gradcli.vjp(lambda z: tf.math.real(z * z), {"z": Z})
    grads = {g.name: g.values for g in vjp.gradients}
    np.testing.assert_allclose(grads["z.real"], 2 * Z.real, rtol=1e-15)
    np.testing.assert_allclose(grads["z.imag"], -2 * Z.imag, rtol=1e-15)
