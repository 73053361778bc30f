"""forward, vjp, jvp and jacobian: numbers against closed forms, --save/@file
chaining, Keras weights and .keras files, numeric mode, and bad input."""

from __future__ import annotations


import numpy as np
import pytest

from tests.conftest import fixture, fresh_process, gradcli, sample

SQUARE = sample("square.py")
TWO = sample("two_by_two.py")
A = np.array([0.5, -1.0, 2.0])  # two_by_two.py's inputs
B = np.array([1.5, 0.25, -0.75])


def ok(*args):
    run = gradcli(*args)
    assert run.exit_code == 0, run
    return run


def usage_error(*args, contains: str):
    """Exit 2, nothing on stdout, exactly one line on stderr: ``Error: ...``."""
    run = gradcli(*args)
    assert run.exit_code == 2, run
    assert run.stdout == "", run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), run
    assert contains in lines[0], run
    return lines[0]


def block(document, output, input):
    (found,) = [b for b in document["blocks"] if b["output"] == output and b["input"] == input]
    return np.array(found["values"])


def gradient(document, name):
    (found,) = [g for g in document["gradients"] if g["name"] == name]
    return None if found["values"] is None else np.array(found["values"])


def named(document, key, name):
    (found,) = [a for a in document[key] if a["name"] == name]
    return np.array(found["values"])


# --- y = x * x at x = [1, 2] ---------------------------------------------------


def test_square_jacobian_is_diag_2x():
    envelope = ok("jacobian", SQUARE, "--json").json()
    assert envelope["command"] == "jacobian" and envelope["schema"] == 2 and envelope["ok"] is True
    doc = envelope["result"]
    np.testing.assert_array_equal(block(doc, "output", "x"), [[2.0, 0.0], [0.0, 4.0]])
    assert doc["mode"] == "reverse" and doc["passes"] == 2


def test_square_jacobian_text_labels_rows_and_columns():
    out = ok("jacobian", SQUARE).stdout
    assert "output[0]" in out and "x[1]" in out
    assert "reverse mode (chosen): 2 vectorised VJP passes" in out


def test_square_vjp_default_seed_is_ones():
    doc = ok("vjp", SQUARE, "--json").result
    np.testing.assert_array_equal(gradient(doc, "x"), [2.0, 4.0])
    assert doc["seeds"][0]["source"] == "ones (default)"
    assert any("tf.gradients" in n for n in doc["notes"])


def test_square_vjp_with_seed():
    doc = ok("vjp", SQUARE, "--cotangent", "output=[2, 3]", "--json").result
    np.testing.assert_array_equal(gradient(doc, "x"), [4.0, 12.0])  # 2x * c


def test_square_vjp_text_shows_the_numbers():
    out = ok("vjp", SQUARE, "--cotangent", "output=[2, 3]").stdout
    assert "[ 4. 12.]" in out and "given" in out


def test_square_jvp():
    doc = ok("jvp", SQUARE, "--tangent", "x=[1, 0]", "--json").result
    np.testing.assert_array_equal(named(doc, "outputs", "output"), [2.0, 0.0])


def test_square_forward():
    doc = ok("forward", SQUARE, "--json").result
    (output,) = doc["outputs"]
    assert output["name"] == "output" and output["shape"] == [2] and output["dtype"] == "float64"
    np.testing.assert_array_equal(output["values"], [1.0, 4.0])


# --- two inputs, two outputs: u = a*b, v = sin(a) + b^2 ------------------------

TWO_CLOSED_FORM = {
    ("u", "a"): np.diag(B),
    ("u", "b"): np.diag(A),
    ("v", "a"): np.diag(np.cos(A)),
    ("v", "b"): np.diag(2 * B),
}


@pytest.mark.parametrize("mode", ["auto", "forward"])
def test_two_by_two_all_four_partials(mode):
    doc = ok("jacobian", TWO, "--mode", mode, "--json").result
    assert len(doc["blocks"]) == 4
    for (o, n), truth in TWO_CLOSED_FORM.items():
        np.testing.assert_allclose(block(doc, o, n), truth, rtol=1e-12, atol=1e-15)
    if mode == "forward":
        assert doc["mode"] == "forward" and doc["passes"] == 6


def test_two_by_two_of_and_wrt_select_blocks():
    doc = ok("jacobian", TWO, "--of", "v", "--wrt", "b", "--json").result
    assert [(b["output"], b["input"]) for b in doc["blocks"]] == [("v", "b")]
    np.testing.assert_allclose(block(doc, "v", "b"), np.diag(2 * B))


def test_two_by_two_vjp_seed_for_one_output_zeros_the_other():
    c = np.array([1.0, -2.0, 0.5])
    run = ok("vjp", TWO, "--cotangent", f"u={c.tolist()}", "--json")
    doc = run.result
    np.testing.assert_allclose(gradient(doc, "a"), B * c)  # du/da^T c; v seeded with 0
    np.testing.assert_allclose(gradient(doc, "b"), A * c)
    sources = {s["name"]: s["source"] for s in doc["seeds"]}
    assert sources == {"u": "given", "v": "zeros (not given)"}
    assert "output v gets a zero cotangent (none given)" in doc["notes"]


def test_two_by_two_vjp_default_sums_both_outputs():
    doc = ok("vjp", TWO, "--json").result
    np.testing.assert_allclose(gradient(doc, "a"), B + np.cos(A))
    np.testing.assert_allclose(gradient(doc, "b"), A + 2 * B)


def test_two_by_two_jvp_tangent_on_one_input():
    t = np.array([1.0, 2.0, -1.0])
    doc = ok("jvp", TWO, "--tangent", f"a={t.tolist()}", "--json").result
    np.testing.assert_allclose(named(doc, "outputs", "u"), B * t)
    np.testing.assert_allclose(named(doc, "outputs", "v"), np.cos(A) * t)
    assert "zero tangent for b (none given)" in doc["notes"]


def test_scalar_seed_broadcasts():
    doc = ok("vjp", SQUARE, "--cotangent", "output=3", "--json").result
    np.testing.assert_array_equal(gradient(doc, "x"), [6.0, 12.0])


# --- --save and @FILE.npz:KEY ---------------------------------------------------


def test_save_round_trip(tmp_path):
    path = tmp_path / "out.npz"
    run = ok("forward", TWO, "--save", path)
    assert "saved 2 arrays" in run.stderr
    with np.load(path) as saved:
        assert sorted(saved.files) == ["u", "v"]
        np.testing.assert_allclose(saved["u"], A * B)
        np.testing.assert_allclose(saved["v"], np.sin(A) + B**2)
    # the saved output fed back as a seed: J^T u for u = a*b
    doc = ok("vjp", TWO, "--cotangent", f"u=@{path}:u", "--json").result
    np.testing.assert_allclose(gradient(doc, "a"), B * (A * B))


def test_save_jacobian_keys_are_output_slash_input(tmp_path):
    path = tmp_path / "jac.npz"
    ok("jacobian", TWO, "--save", path)
    with np.load(path) as saved:
        assert sorted(saved.files) == ["u/a", "u/b", "v/a", "v/b"]
        for (o, n), truth in TWO_CLOSED_FORM.items():
            np.testing.assert_allclose(saved[f"{o}/{n}"], truth, atol=1e-15)


def test_chained_vjps_equal_one_shot(tmp_path):
    """f(g(x)) split into two model files: backpropagation across the boundary."""
    h, dh = tmp_path / "h.npz", tmp_path / "dh.npz"
    c = [1.0, -1.0]
    ok("forward", sample("chain_inner.py"), "--save", h)
    ok("vjp", sample("chain_outer.py"), "--set", f"h=@{h}:output", "--cotangent", f"output={c}", "--save", dh)
    chained = gradient(ok("vjp", sample("chain_inner.py"), "--cotangent", f"output=@{dh}:h", "--json").result, "x")
    one_shot = gradient(ok("vjp", sample("chain_full.py"), "--cotangent", f"output={c}", "--json").result, "x")
    np.testing.assert_allclose(chained, one_shot, rtol=1e-14)
    # and both against the chain rule in closed form
    x0, x1 = 0.5, -1.5
    hv = np.array([x0 * x1, np.sin(x0), x1**2])
    dg = np.array([[x1, x0], [np.cos(x0), 0.0], [0.0, 2 * x1]])
    df = np.array([[1.0, hv[2], hv[1]], [np.exp(hv[0]) * hv[2], 0.0, np.exp(hv[0])]])
    np.testing.assert_allclose(one_shot, dg.T @ df.T @ np.array(c), rtol=1e-12)


# --- large arrays: summaries, never a silent "..." -------------------------------


def test_large_forward_is_summarised_with_counts():
    out = ok("forward", fixture("insp_large.py")).stdout
    assert "first 8 of 100 entries" in out
    assert "max 100" in out and "--json or --save" in out
    assert "..." not in out and "…" not in out


def test_large_jacobian_lists_norms_and_largest_entries():
    out = ok("jacobian", fixture("insp_large.py")).stdout
    assert "10000 entries (100 x 100)" in out
    assert "100 nonzero" in out
    x = np.arange(1, 101) / 10.0
    assert f"Frobenius norm {np.linalg.norm(2 * x):.6g}" in out
    assert "output[99]" in out and "x[99]" in out  # the largest entry, 2 * 10
    assert "..." not in out and "…" not in out


# --- Keras models and .keras files -------------------------------------------------


def test_keras_vjp_weights_and_norms():
    doc = ok("vjp", sample("keras_mlp.py"), "--json").result
    names = [g["name"] for g in doc["gradients"]]
    # every weight and, by default, the data x
    assert names == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias", "x"]
    # d sum(outputs) / d (last bias) = batch size (3) for each unit
    np.testing.assert_allclose(gradient(doc, "dense_1/bias"), [3.0, 3.0])
    # d sum(tanh(x W1 + b1) W2 + b2) / dx = ((1 - h**2) * (1 W2^T)) W1^T, h = tanh(x W1 + b1)
    from gradcli.model.loading import load_model

    p = load_model(sample("keras_mlp.py")).point
    h = np.tanh(p["x"] @ p["dense/kernel"] + p["dense/bias"])
    expected = ((1 - h**2) * (np.ones((3, 2)) @ p["dense_1/kernel"].T)) @ p["dense/kernel"].T
    np.testing.assert_allclose(gradient(doc, "x"), expected, rtol=1e-12)
    rows = {w["name"]: w for w in doc["weights"]}
    assert rows["dense/bias"]["status"] == "zero weight"
    assert rows["dense/kernel"]["status"] == "ok"
    kernel = rows["dense_1/kernel"]
    assert kernel["ratio"] == pytest.approx(kernel["gradient_norm"] / kernel["weight_norm"])


def test_keras_vanishing_and_exploding_are_flagged():
    run = ok("vjp", sample("keras_badly_scaled.py"))
    assert "warning: dense/kernel: gradient is vanishing" in run.stdout
    assert "warning: dense_1/kernel: gradient is exploding" in run.stdout
    doc = ok("vjp", sample("keras_badly_scaled.py"), "--json").result
    status = {w["name"]: w["status"] for w in doc["weights"]}
    assert status["dense/kernel"] == "vanishing" and status["dense_1/kernel"] == "exploding"
    # closed form: layer 2 sees tanh(...) = 1 everywhere, layer 3 multiplies by 1e5:
    # d sum(y) / d W2 = sum over the 2 examples of 1 * 1e5 = 2e5 per entry
    np.testing.assert_allclose(gradient(doc, "dense_1/kernel"), np.full((4, 4), 2e5))


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    """y = x W + b with known weights, saved as a .keras file."""
    import keras

    x = keras.Input((3,), name="x")
    layer = keras.layers.Dense(2, name="dense")
    model = keras.Model(x, layer(x))
    w = np.array([[1.0, -1.0], [2.0, 0.5], [0.0, 3.0]], dtype="float32")
    layer.set_weights([w, np.array([0.1, 0.2], dtype="float32")])
    path = tmp_path_factory.mktemp("keras") / "linear.keras"
    model.save(path)
    return str(path), w


def test_keras_file_vjp_weights_and_inputs(keras_file):
    path, w = keras_file
    x = np.array([[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]])
    c = np.array([[1.0, 2.0], [-1.0, 0.5]])
    doc = ok("vjp", path, "--input", f"x={x.tolist()}", "--cotangent", f"output={c.tolist()}",
             "--wrt", "dense/kernel,dense/bias,x", "--json").result
    np.testing.assert_allclose(gradient(doc, "dense/kernel"), x.T @ c, rtol=1e-6)
    np.testing.assert_allclose(gradient(doc, "dense/bias"), c.sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(gradient(doc, "x"), c @ w.T, rtol=1e-6)
    assert [r["name"] for r in doc["weights"]] == ["dense/kernel", "dense/bias"]


def test_keras_file_errors(keras_file):
    path, _ = keras_file
    usage_error("vjp", path, contains="needs its data as --input NAME=VALUE (inputs: x)")
    usage_error("vjp", path, "--input", "x=[[1,2,3]]", "--input", "z=1", contains="unknown input for --input 'z'")
    usage_error("forward", SQUARE, "--input", "x=1", contains="use --set")


# --- black-box numpy model: --numeric ----------------------------------------------

BLACKBOX = fixture("insp_numpy_blackbox.py")
X0, X1 = 0.3, 0.7
BLACKBOX_J = np.array([[np.cos(X0) * X1, np.sin(X0)], [2 * X0, np.exp(X1)]])


def test_numeric_jacobian_of_numpy_model():
    doc = ok("jacobian", BLACKBOX, "--numeric", "--json").result
    assert doc["mode"] == "numeric" and "finite differences only" in doc["method"]
    np.testing.assert_allclose(block(doc, "output", "x"), BLACKBOX_J, rtol=1e-8)
    assert doc["blocks"][0]["error"] < 1e-7


def test_numeric_vjp_and_jvp_of_numpy_model():
    c = np.array([1.0, 2.0])
    doc = ok("vjp", BLACKBOX, "--numeric", "--cotangent", f"output={c.tolist()}", "--json").result
    np.testing.assert_allclose(gradient(doc, "x"), BLACKBOX_J.T @ c, rtol=1e-8)
    doc = ok("jvp", BLACKBOX, "--numeric", "--tangent", "x=[1, 0]", "--json").result
    np.testing.assert_allclose(named(doc, "outputs", "output"), BLACKBOX_J[:, 0], rtol=1e-8)


@pytest.mark.parametrize("command", [["vjp"], ["jvp", "--tangent", "x=[1, 0]"], ["jacobian"]])
def test_numpy_model_without_numeric_is_a_model_error_pointing_at_numeric(command):
    """No gradient at all is exit 3, never zeros or Nones that look like an answer."""
    run = gradcli(command[0], BLACKBOX, *command[1:])
    assert run.exit_code == 3 and run.stdout == "", run
    assert run.stderr.strip() == (
        "Error: tests/models/insp_numpy_blackbox.py: TensorFlow sees no gradient: no output (output) "
        "depends on x through TensorFlow operations (computed in numpy or another library, "
        "or cut by tf.stop_gradient or an integer cast?); use --numeric for finite differences only"
    ), run


def test_numeric_agrees_with_analytic_on_a_tf_model():
    doc = ok("jacobian", TWO, "--numeric", "--json").result
    for (o, n), truth in TWO_CLOSED_FORM.items():
        np.testing.assert_allclose(block(doc, o, n), truth, rtol=1e-8, atol=1e-9)


# --- bad input: exit 2, one line ---------------------------------------------------


def test_bad_seed_shape():
    usage_error("vjp", SQUARE, "--cotangent", "output=[1, 2, 3]",
                contains="--cotangent output has shape [3], expected [2] (or a scalar)")


def test_unknown_output_name():
    usage_error("vjp", SQUARE, "--cotangent", "y=[1, 2]",
                contains="unknown output for --cotangent 'y' (known: output)")
    usage_error("jacobian", TWO, "--of", "w", contains="unknown output for --of 'w' (known: u, v)")


def test_non_numeric_value():
    usage_error("vjp", SQUARE, "--cotangent", "output=abc", contains="'abc' is not a number")
    usage_error("jvp", SQUARE, "--tangent", 'x=["a", "b"]', contains="is not numeric")


def test_other_bad_usage():
    usage_error("jvp", SQUARE, "--tangent", "z=1", contains="unknown input for --tangent 'z' (known: x)")
    usage_error("jvp", SQUARE, "--tangent", "x=[1, 2, 3]", contains="--tangent x has shape [3], expected [2]")
    usage_error("jvp", SQUARE, contains="jvp needs at least one --tangent")
    usage_error("forward", SQUARE, "--save", "out.txt", contains="must end in .npz")
    usage_error("vjp", SQUARE, "--cotangent", "output=@missing.npz:k", contains="no such file")
    usage_error("jacobian", SQUARE, "--numeric", "--mode", "forward", contains="cannot be combined with --numeric")


def test_usage_errors_do_not_import_tensorflow():
    assert fresh_process("vjp", "sample_models/square.py", "--cotangent", "output=abc") == (2, [])
    assert fresh_process("jacobian", "--help") == (0, [])


# --- the library, without the command line -------------------------------------------


def test_library_api_returns_result_objects():
    import gradcli
    from gradcli.results import JacobianResult, VjpResult

    result = gradcli.jacobian(SQUARE)
    assert isinstance(result, JacobianResult)
    np.testing.assert_array_equal(result.blocks[0].values, [[2.0, 0.0], [0.0, 4.0]])
    assert result.blocks[0].largest[0].value == 4.0 and result.blocks[0].largest[0].input_index == [1]
    vjp = gradcli.vjp(SQUARE, {"output": np.array([2.0, 3.0])})
    assert isinstance(vjp, VjpResult)
    np.testing.assert_array_equal(vjp.arrays()["x"], [4.0, 12.0])


def test_disconnected_blocks_are_none_not_zero():
    doc = ok("jacobian", fixture("insp_partial.py"), "--json").result
    np.testing.assert_array_equal(block(doc, "u", "a"), 2.0 * np.eye(2))
    np.testing.assert_array_equal(block(doc, "v", "b"), [[3.0]])
    values = {(b["output"], b["input"]): b["values"] for b in doc["blocks"]}
    assert values[("u", "b")] is None and values[("v", "a")] is None
    assert any("b -> u" in n and "v" in n for n in doc["notes"])
    out = ok("jacobian", fixture("insp_partial.py")).stdout
    assert out.count("None: TensorFlow returns no gradient (disconnected)") == 2


def test_a_float32_jacobian_in_forward_mode_is_not_called_a_custom_gradient():
    """insp_float32_forward.py: float32 (--native-dtype), 6 outputs of 3 inputs,
    so auto takes forward mode; no gradient of its own, so both modes agree up
    to float32 round-off (the rule's 1e-8 scaled by sqrt(eps / eps64)): forward mode is kept, no note
    says they disagree, and the block is A diag(1 - tanh(x)^2) to float32's
    resolution."""
    doc = ok("jacobian", fixture("insp_float32_forward.py"), "--native-dtype", "--json").result
    module_a = np.array([[1.0, 0.5, -0.3], [0.2, -1.1, 0.7], [0.9, 0.4, 0.1],
                         [-0.6, 0.3, 1.2], [0.5, -0.2, -0.8], [1.3, 0.6, 0.2]])
    x = np.array([0.3, -1.2, 0.8])
    np.testing.assert_allclose(block(doc, "output", "x"), module_a * (1 - np.tanh(x) ** 2), rtol=1e-5, atol=1e-6)
    assert doc["mode"] == "forward"
    assert not any("forward mode disagrees" in n for n in doc["notes"]), doc["notes"]


def test_jacobian_of_a_custom_gradient_is_what_backprop_computes():
    # 6 output elements, 3 input elements: size alone picks forward mode, but
    # forward mode ignores tf.custom_gradient. d a/dx = diag(2x + 0.1), d b/dx = diag(2x - 0.1).
    doc = ok("jacobian", fixture("cancelling_outputs.py"), "--json").result
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(block(doc, "a", "x"), np.diag(2 * x + 0.1), rtol=1e-12)
    np.testing.assert_allclose(block(doc, "b", "x"), np.diag(2 * x - 0.1), rtol=1e-12)
    assert doc["mode"] == "reverse"
    assert any("forward mode disagrees with reverse mode" in n for n in doc["notes"])
