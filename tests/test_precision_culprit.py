"""Issue 11 classes 4 and 6: hidden lower precision, and the culprit op.

Truth is independent of gradcli: closed-form derivatives written in the model
files' docstrings (evaluated here with numpy in float64), known bug factors,
and definition lines read from the fixture files.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import check_json, fixture, gradcli, line_of as source_line, only_model


def checked(name: str, *options: str):
    """``check_json`` of the fixture ``name``."""
    return check_json(fixture(name), *options)


def pairs(doc):
    return {(p["input"], p["output"]): p for p in only_model(doc)["pairs"]}


def line_of(name: str, text: str) -> int:
    return source_line(fixture(name), text)


# -- class 4: hidden lower precision -----------------------------------------


def test_float32_inside_a_float64_model_is_checked_with_float32_rules():
    run, doc = checked("prec_cast_float32.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    assert model["tolerance"]["rtol"] == pytest.approx(1e-3)
    note = next(n for n in model["notes"] if "computes in float32" in n)
    assert f"Cast at tests/models/prec_cast_float32.py:{line_of('prec_cast_float32.py', 'low = tf.cast')}" in note
    # The numeric side agrees with the closed form to float32 resolution.
    x = np.array([0.3, -1.2, 2.0, 0.7])
    truth = np.cos(x) * np.exp(x / 2) + np.sin(x) * np.exp(x / 2) / 2
    worst = pairs(doc)[("x", "output")]["worst"]
    assert worst["numeric"] == pytest.approx(truth[worst["input_index"][0]], rel=1e-4)


def test_keras_layer_that_autocasts_is_float32_and_passes():
    """A layer made inside the function autocasts to float32 on every call."""
    run, doc = checked("prec_keras_autocast_inner.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    assert any("computes in float32" in n and "Cast" in n for n in model["notes"])


def test_module_level_float32_layer_is_promoted_and_checked_in_float64():
    """Its weights are inputs (issue 13), promoted with the layer's policy, so
    nothing autocasts: float64 rules, and errors at float64's level."""
    run, doc = checked("prec_keras_autocast.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float64"
    assert {p["input"] for p in model["pairs"]} == {"dense/kernel", "dense/bias", "x"}
    assert max(p["max_rel_error"] for p in model["pairs"]) < 1e-8


def test_keras_model_that_falls_back_to_float32_is_checked_with_float32_rules():
    run, doc = checked("prec_keras_fallback.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    assert any("could not rebuild the Keras model in float64" in n for n in model["notes"])
    assert any("does not run in float64" in n for n in model["notes"])


def test_subclassed_keras_model_that_cannot_be_rebuilt_runs_in_float64_by_its_policies():
    """No float64 clone (a subclassed model has no layer graph): the model
    itself computes in float64 with its layers' dtype policies switched, and
    is checked with float64 rules. Float32 arithmetic differenced in float64
    would leave errors of about 1e-4 relative; these are float64's."""
    run, doc = checked("prec_keras_subclassed.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float64" and model["tolerance"]["rtol"] == pytest.approx(1e-6)
    assert any("switching their dtype policies" in n for n in model["notes"])
    assert model["call_proof"]["proven"]
    assert max(p["max_rel_error"] for p in model["pairs"]) < 1e-8


def test_mixed_float16_native_dtype_uses_the_float16_compute_dtype_and_passes():
    run, doc = checked("prec_mixed_float16.py", "--native-dtype")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float16"
    assert all(p["verdict"] == "pass" for p in model["pairs"])
    assert any("computes in float16" in n for n in model["notes"])


def test_mixed_bfloat16_outputs_are_checked_with_bfloat16_rules_and_pass():
    """bfloat16 outputs were taken for non-floating ("no floating-point output"):
    now they are checked, with bfloat16's steps and tolerances, and a correct
    model passes at its dtype's resolution (``compare.RESOLVE_FRACTIONS``: 4
    times float16's, by eps**(2/3)), as float16 models do; it was
    inconclusive. Five pairs: the four weights and, by default, the data x.
    Promoted to float64 (the default) the same model passes."""
    run, doc = checked("prec_mixed_bfloat16.py", "--native-dtype")
    model = only_model(doc)
    assert model["dtype"] == "bfloat16" and model["error"] is None
    assert model["tolerance"]["resolve"] == pytest.approx(0.4)
    verdicts = {p["verdict"] for p in model["pairs"]}
    assert verdicts == {"pass"} and len(model["pairs"]) == 5
    assert run.exit_code == 0, run
    assert any("computes in bfloat16" in n for n in model["notes"])
    run, doc = checked("prec_mixed_bfloat16.py")
    assert run.exit_code == 0, run
    assert all(p["verdict"] == "pass" for p in only_model(doc)["pairs"])


def test_float16_compute_correct_passes_and_a_20_percent_error_fails():
    run, doc = checked("prec_float16_custom.py")
    assert run.exit_code == 0, run
    run, doc = checked("prec_float16_bug.py")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_kinks"] == 0  # no false kink from round-off
    x = np.array([0.3, -1.2, 0.7])
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(2 * np.cos(x[i]), rel=2e-2)
        assert element["analytic"] == pytest.approx(1.6 * np.cos(x[i]), rel=2e-2)
    assert pair["culprit"]["site"]["description"] == "tf.custom_gradient wave"


def _tanh_xw_derivative():
    """d tanh(x W)[j] / d x[i] = (1 - y[j]**2) W[i, j], at the fixture's x read
    by TensorFlow as float32."""
    x = np.array([[0.3, -0.7]], dtype=np.float32).astype(np.float64)
    w = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32).astype(np.float64)
    y = np.tanh(x @ w)
    return (1 - y[0] ** 2)[:, None] * w.T  # [output j, input i]


def test_list_inputs_beside_a_float32_constant_are_checked_in_float32_with_a_note():
    run, doc = checked("lists_float32_constant.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    assert any(n.startswith("the model does not run in float64 (forward pass raised InvalidArgumentError")
               and n.endswith("x is written as Python numbers: checking in float32, TensorFlow's dtype "
                              "for them, with steps and tolerances for that dtype") for n in model["notes"])
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass"
    truth = _tanh_xw_derivative()
    worst = pair["worst"]
    expected = truth[worst["output_index"][1], worst["input_index"][1]]
    assert worst["numeric"] == pytest.approx(expected, rel=1e-3)
    assert worst["analytic"] == pytest.approx(expected, rel=1e-5)


def test_list_inputs_beside_a_float32_constant_with_a_wrong_gradient_fail_as_a_mismatch():
    run, doc = checked("lists_float32_constant_wrong.py")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_failing"] == 4
    truth = _tanh_xw_derivative()
    for element in pair["failing"]:
        expected = truth[element["output_index"][1], element["input_index"][1]]
        assert element["numeric"] == pytest.approx(expected, rel=1e-3)
        assert element["analytic"] == pytest.approx(1.5 * expected, rel=1e-5)
    assert pair["culprit"]["definition"] == (
        f"tests/models/lists_float32_constant.py:{line_of('lists_float32_constant.py', 'def tanh(')}"
    )


def test_bfloat16_compute_correct_passes_and_twice_the_gradient_is_a_mismatch_with_its_culprit():
    """d/dx 2 sum(sin(x)) = 2 cos(x); the wrong gradient gives 4 cos(x)."""
    x = np.array([0.3, -1.2, 0.7])
    run, doc = checked("prec_bfloat16_custom.py")
    assert run.exit_code == 0, run
    assert only_model(doc)["dtype"] == "bfloat16"
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass"
    i = pair["worst"]["input_index"][0]
    assert pair["worst"]["numeric"] == pytest.approx(2 * np.cos(x[i]), rel=5e-2)
    run, doc = checked("prec_bfloat16_bug.py")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_failing"] == 3
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(2 * np.cos(x[i]), rel=5e-2)
        assert element["analytic"] == pytest.approx(4 * np.cos(x[i]), rel=3e-2)
    assert pair["culprit"]["site"]["description"] == "tf.custom_gradient wave"


def test_wrong_float16_gradient_is_a_mismatch_with_its_culprit_not_inconclusive():
    """A float16 model checked in float16, its gradient 2x off: the one-sided
    slopes do not settle to a tenth in float16, but they refute the gradient.
    Closed form: d sum(sin(x s)) / dx = s cos(x s); the gradient 2 s cos(x s)."""
    name = "prec_float16_inputs_bug.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    assert only_model(doc)["dtype"] == "float16"
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_failing"] == 3
    x = np.array([0.3, -1.2, 0.7], dtype=np.float16).astype(np.float64)
    s = np.array([1.5, -0.5, 2.0])
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(s[i] * np.cos(x[i] * s[i]), rel=5e-2)
        assert element["analytic"] == pytest.approx(2 * s[i] * np.cos(x[i] * s[i]), rel=1e-2)
    culprit = pair["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient wave"
    assert culprit["definition"] == f"tests/models/{name}:{line_of(name, 'def wave(')}"
    assert "culprit: tf.custom_gradient wave" in gradcli("check", fixture(name)).stdout


def test_a_float64_model_keeps_float64_rules():
    run, doc = checked("culprit_square.py")
    model = only_model(doc)
    assert model["dtype"] == "float64"
    assert not any("computes in" in n for n in model["notes"])


# -- class 6: the culprit ------------------------------------------------------


@pytest.mark.parametrize(
    "name, function, input_name, half",
    [
        ("culprit_square.py", "square", "x", True),  # x * x in the forward
        ("culprit_shifted_square.py", "energy", "x", True),  # v * v, v = x - 1
        ("culprit_two_args.py", "weighted_gap", "a", False),  # (a - b)**2 * a
        ("culprit_after_autocast.py", "wave", "x", False),  # after a Keras autocast
        ("culprit_in_tf_function.py", "cube", "x", False),  # inside a tf.function
    ],
)
def test_wrong_custom_gradient_is_the_culprit_not_its_forward_ops(name, function, input_name, half):
    run, doc = checked(name)
    assert run.exit_code == 1, run
    pair = pairs(doc)[(input_name, "output")]
    assert pair["verdict"] == "mismatch"
    culprit = pair["culprit"]
    assert culprit is not None, run
    assert culprit["site"]["description"] == f"tf.custom_gradient {function}"
    assert culprit["site"]["op_type"] == "IdentityN"
    assert culprit["definition"] == f"tests/models/{name}:{line_of(name, f'def {function}(')}"
    if half:  # the bug drops a factor 2: the op's own gradient is half the differences
        assert culprit["analytic"] == pytest.approx(0.5 * culprit["numeric"], rel=1e-6)


def test_correct_custom_gradient_model_has_no_culprit_and_passes():
    run, doc = checked("prec_float16_custom.py")
    assert all(p["culprit"] is None for p in only_model(doc)["pairs"])


def test_wrong_tensorflow_op_gradient_names_the_op_and_its_line():
    name = "culprit_cholesky.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("a", "output")]
    culprit = pair["culprit"]
    assert culprit["site"]["op_type"] == "Cholesky"
    assert culprit["site"]["location"] == f"tests/models/{name}:{line_of(name, 'tf.linalg.cholesky(a)')}"
    # Truth: logdet of S = tril(a) + tril(a, -1)^T; d/da_ij = 2 S^-1_ij below the
    # diagonal, S^-1_ii on it, 0 above (Cholesky never reads the upper triangle).
    a = np.array([[4.0, 0.3, 0.2], [1.0, 3.0, 0.1], [0.5, 0.4, 2.0]])
    s = np.tril(a) + np.tril(a, -1).T
    inv = np.linalg.inv(s)
    truth = np.where(np.tri(3, k=-1, dtype=bool), 2 * inv, 0.0) + np.diag(np.diag(inv))
    for element in pair["failing"]:
        i, j = element["input_index"]
        assert element["numeric"] == pytest.approx(truth[i, j], rel=1e-6, abs=1e-9)


def test_disconnected_names_the_op_whose_gradient_is_none():
    name = "disconnected_betainc.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("a", "output")]
    assert pair["verdict"] == "disconnected"
    (site,) = pair["sites"]
    assert site["op_type"] == "Betainc"
    assert "returns no gradient for a" in site["description"]
    assert site["location"] == f"tests/models/{name}:{line_of(name, 'tf.math.betainc')}"
    assert "Betainc returns no gradient for a at tests/models/" in pair["explanation"]


def test_svd_at_repeated_singular_values_is_found_by_its_gradient_to_the_output():
    name = "culprit_svd_repeated.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("a", "output")]
    culprit = pair["culprit"]
    assert culprit["site"]["op_type"] == "Svd"
    assert culprit["checked"] == "gradient to the output"
    assert culprit["site"]["location"] == f"tests/models/{name}:{line_of(name, 'tf.linalg.svd(a)')}"
    q = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    m = q.T @ np.array([[1.0, 2.0], [3.0, 4.0]])
    truth = q @ (m - m.T) / 2
    for element in pair["failing"]:
        i, j = element["input_index"]
        assert element["numeric"] == pytest.approx(truth[i, j], rel=1e-6, abs=1e-9)


def test_a_gradient_function_computing_in_float32_gets_float32_rules():
    name = "prec_float32_gradient.py"
    run, doc = checked(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    line = line_of(name, "low = tf.cast(x, tf.float32)")
    assert any(f"Cast in the gradient at tests/models/{name}:{line}" in n for n in model["notes"])
    # The analytic side really is float32-accurate only: off 4 x by more than
    # float64's rtol 1e-6, within float32's 1e-3.
    pair = pairs(doc)[("x", "output")]
    x = np.array([300.3, -512.7, 123.9])
    worst = pair["worst"]
    truth = 4 * x[worst["input_index"][0]]
    assert 1e-6 < abs(worst["analytic"] - truth) / abs(truth) < 1e-3
    assert worst["numeric"] == pytest.approx(truth, rel=1e-9)


def test_custom_gradient_inside_tf_function_numbers_match_the_closed_form():
    run, doc = checked("culprit_in_tf_function.py")
    pair = pairs(doc)[("x", "output")]
    x = np.array([0.3, -0.7, 1.1]) + 0.1
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(np.cos(x[i] ** 3) * 3 * x[i] ** 2, rel=1e-7)
        assert element["analytic"] == pytest.approx(np.cos(x[i] ** 3) * 3 * x[i], rel=1e-12)


@pytest.mark.parametrize("name, switched", [("culprit_in_tf_function.py", True), ("by_layer_functional.py", False)])
def test_the_model_graph_inlines_tf_functions_only_when_the_graph_calls_one(monkeypatch, name, switched):
    # Inlining flips TensorFlow's process-wide run_functions_eagerly: another
    # thread's tf.functions (the joint check beside the layer pass) would run
    # eagerly meanwhile. A graph without a call is the same graph either way.
    import tensorflow as tf

    from gradcli.model.loading import load_model
    from gradcli.verdicts.culprit import ModelGraph

    model = load_model(fixture(name))
    flips, flip = [], tf.config.run_functions_eagerly
    monkeypatch.setattr(tf.config, "run_functions_eagerly", lambda on: (flips.append(on), flip(on))[1])
    graph = ModelGraph(model)
    assert graph.trace()
    assert flips == ([True, False] if switched else [])
    ops = {op.type for op in graph.graph.get_operations()}
    assert not ops & {"PartitionedCall", "StatefulPartitionedCall"}  # inlined: the ops are the graph's own
    assert not tf.config.functions_run_eagerly()


def test_a_float16_gradient_2x_off_beyond_the_central_differences_error_is_a_mismatch():
    """Issue 35, item 6: where float16's one-sided slopes do not settle, a
    gradient 2x off was called inconclusive ("too noisy") although its error
    was many times the central difference's own error estimate. The central
    difference refutes it (``ladder.central_refutes``): a mismatch naming the
    custom gradient. The right twin passes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_float16_far", fixture("_float16_far.py"))
    far = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(far)
    truth = far.derivative(far.X)
    run, doc = checked("prec_float16_far.py")
    assert run.exit_code == 0, run
    assert only_model(doc)["dtype"] == "float16"
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass"
    run, doc = checked("prec_float16_far_bug.py")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch"
    assert pair["failing"]
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert abs(far.X[i]) > 0.9  # only where the gradient is wrong
        assert element["numeric"] == pytest.approx(truth[i], rel=5e-2, abs=1e-2)
        assert element["analytic"] == pytest.approx(2 * truth[i], rel=3e-2)
        assert element["abs_error"] > 4 * element["fd_error"]  # far beyond the estimate
    culprit = pair["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient scale"
    assert culprit["definition"] == f"tests/models/_float16_far.py:{line_of('_float16_far.py', 'def scale(')}"


def _check_op_replaced(monkeypatch, chosen, outcome) -> list:
    """The culprit search's local check (``culprit.check_op``) with
    ``outcome()`` in place of the check of every op ``chosen(op, to)`` picks
    (``to``: None in an op's own scan, the output in the scan to it); the
    names of the ops it picked, in order."""
    from gradcli.verdicts import culprit

    check_op, picked = culprit.check_op, []

    def replaced(graph, op, feeds, feed_values, seen, tol, rng, to=None, order=1):
        if chosen(op, to):
            picked.append(op.name)
            return outcome()
        return check_op(graph, op, feeds, feed_values, seen, tol, rng, to, order)

    monkeypatch.setattr(culprit, "check_op", replaced)
    return picked


def test_an_op_whose_gradient_to_the_output_cannot_be_checked_ends_the_scan(tmp_path, monkeypatch):
    """The scan from the output backwards blames the first op whose gradient
    to the output is wrong only after every op between it and the output is
    shown right. An op whose check raises (here Svd's, made to raise) is not
    shown right: the scan ends there, without a culprit, rather than blaming
    the op before it (the doubling, whose gradient to the output carries
    Svd's wrong one). Svd's own scan alone still names Svd (the test above)."""
    import gradcli

    source = tmp_path / "doubled_svd.py"
    source.write_text(
        "import numpy as np\nimport tensorflow as tf\n\n"
        "C = [[1.0, 2.0], [3.0, 4.0]]\n\n\n"
        "def model(a):\n"
        "    s, u, v = tf.linalg.svd(2.0 * a)\n"
        "    return tf.reduce_sum(tf.matmul(u, v, transpose_b=True) * tf.constant(C, tf.float64))\n\n\n"
        "c, s = np.cos(0.3), np.sin(0.3)\n"
        "inputs = {'a': np.array([[c, -s], [s, c]]) / 2}\n"
    )
    def cannot_be_differenced():
        raise ValueError("cannot be differenced alone")

    refused = _check_op_replaced(monkeypatch, lambda op, to: op.type == "Svd" and to is not None,
                                 cannot_be_differenced)
    (pair,) = gradcli.check(str(source), mode="full").models[0].pairs
    assert pair.failed and refused
    assert pair.culprit is None


def test_an_op_left_unresolved_alone_is_checked_once_for_every_pair_of_a_graph(tmp_path, monkeypatch):
    """Two inputs fail through one wrong custom gradient (its rule scaled by
    0.9). An op whose own local check is unresolved (here the product a * b,
    made so) is passed over in every pair's own scan, so it is checked once
    and kept for the graph, as an op found right is; both pairs still name
    the custom gradient."""
    import gradcli
    from gradcli.verdicts.local_check import UNRESOLVED

    source = tmp_path / "scaled_square.py"
    source.write_text(
        "import numpy as np\nimport tensorflow as tf\n\n\n"
        "@tf.custom_gradient\n"
        "def square(x):\n"
        "    return x * x, lambda dy: dy * 0.9 * 2.0 * x\n\n\n"
        "def model(a, b):\n"
        "    return tf.reduce_sum(square(a * b))\n\n\n"
        "inputs = {'a': np.linspace(0.5, 1.5, 4), 'b': np.linspace(-1.0, 2.0, 4)}\n"
    )
    unresolved = _check_op_replaced(
        monkeypatch, lambda op, to: op.type == "Mul" and to is None and not op.name.startswith("gradients"),
        lambda: UNRESOLVED)
    result = gradcli.check(str(source), mode="full").models[0]
    named = {p.input: p.culprit for p in result.pairs}
    assert set(named) == {"a", "b"} and all(p.failed for p in result.pairs)
    assert all(c is not None and c.site.op_type == "IdentityN" for c in named.values()), named
    assert len(unresolved) == 1, unresolved
