"""gradcli check: verdicts against closed-form derivatives, exit codes, messages."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import error_line, fixture, gradcli, sample


def only_pairs(run):
    document = run.json()
    assert len(document["result"]["models"]) == 1, run
    return {(p["input"], p["output"]): p for p in document["result"]["models"][0]["pairs"]}


# -- correct models pass, with errors at the level float64 differences reach ----------


@pytest.mark.parametrize(
    "name, pairs",
    [
        ("square.py", {("x", "output")}),
        ("two_by_two.py", {("a", "u"), ("a", "v"), ("b", "u"), ("b", "v")}),
        ("linear_regression.py", {("W", "output"), ("b", "output")}),
        ("tanh_net.py", {("w1", "output"), ("w2", "output")}),
        # a Keras model: every weight and, by default, its data x
        ("keras_mlp.py", {(w, "output") for w in ("dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias", "x")}),
    ],
)
@pytest.mark.parametrize("mode", ["full", "fast"])
def test_correct_sample_models_pass(name, pairs, mode):
    run = gradcli("check", sample(name), "--mode", mode, "--json")
    assert run.exit_code == 0, run
    found = only_pairs(run)
    assert set(found) == pairs
    for pair in found.values():
        assert pair["verdict"] == "pass", run
        assert pair["mode"] == mode
        if mode == "full":
            # The promise: max error at most 1e-8 on a correct model (float64 + Richardson).
            assert pair["max_abs_error"] <= 1e-8, pair


def test_full_check_compares_every_element_of_every_block():
    run = gradcli("check", sample("two_by_two.py"), "--json")
    pairs = only_pairs(run)
    # 3 outputs x 3 inputs per block, four blocks.
    assert all(p["compared"] == 9 for p in pairs.values())
    # A correct model settles every element in the first pass: 2 evaluations each
    # (x +- h), no second Richardson level (finite_diff's settling rule).
    assert run.result["models"][0]["evaluations"] == 2 * (3 + 3)


def test_keras_model_is_promoted_to_float64_and_says_so():
    run = gradcli("check", sample("keras_mlp.py"), "--json")
    model = run.result["models"][0]
    assert model["dtype"] == "float64"
    assert any("promoted" in note and "float32 to float64" in note for note in model["notes"])


def test_large_values_pass():
    run = gradcli("check", fixture("large_values.py"), "--json")
    assert run.exit_code == 0, run
    assert {p["verdict"] for p in only_pairs(run).values()} == {"pass"}


# -- wrong gradients fail, and the report says where and by how much -----------------


def softplus(x):
    return np.log1p(np.exp(x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_buggy_custom_gradient_fails_with_element_report(mode):
    run = gradcli("check", sample("buggy_custom_gradient.py"), "--mode", mode, "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["failed"]
    assert pair["mode"] == "full"  # fast falls back to a full comparison of the failing pair
    x = np.array([-1.5, 0.25, 2.0])
    true = 2 * softplus(x) * sigmoid(x)  # d/dx sum(softplus(x)^2)
    buggy = true * (1 + 1e-3 * x)
    worst = pair["worst"]
    assert worst["input_index"] == [2] and worst["output_index"] == []
    assert worst["numeric"] == pytest.approx(true[2], rel=1e-9)
    assert worst["analytic"] == pytest.approx(buggy[2], rel=1e-12)
    assert pair["n_failing"] == 3
    assert pair["max_abs_error"] == pytest.approx(np.max(np.abs(buggy - true)), rel=1e-6)


def test_failure_report_text_names_the_element():
    run = gradcli("check", sample("buggy_custom_gradient.py"))
    assert run.exit_code == 1, run
    assert "FAIL x -> output: mismatch" in run.stdout
    assert "output / x[2]: analytic 3.754277522, numeric 3.746783954" in run.stdout
    assert "0 of 1 model passed" in run.stdout


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_relative_error_of_1e5_fails_in_float64(mode):
    run = gradcli("check", fixture("off_by_1e5.py"), "--mode", mode, "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "mismatch"
    assert pair["max_rel_error"] == pytest.approx(1e-5, rel=1e-3)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_errors_that_cancel_across_outputs_are_caught(mode):
    run = gradcli("check", fixture("cancelling_outputs.py"), "--mode", mode, "--json")
    assert run.exit_code == 1, run
    pairs = only_pairs(run)
    for output, bias in (("a", 0.1), ("b", -0.1)):
        pair = pairs[("x", output)]
        assert pair["verdict"] == "mismatch"
        assert pair["worst"]["analytic"] - pair["worst"]["numeric"] == pytest.approx(bias, abs=1e-8)


def test_fast_mode_reverse_failure_is_named():
    run = gradcli("check", fixture("off_by_1e5.py"), "--mode", "fast", "--probes", "2", "--json")
    pair = only_pairs(run)[("x", "output")]
    assert "fast check failed" in " ".join(pair["warnings"])


# -- other verdicts available without diagnosis ----------------------------------------


def test_sign_loss_is_zero_with_warning():
    run = gradcli("check", sample("sign_loss.py"), "--json")
    assert run.exit_code == 0, run
    pair = only_pairs(run)[("w", "output")]
    assert pair["verdict"] == "zero" and not pair["failed"]
    assert pair["warnings"]


def test_float32_only_model_is_checked_in_float32_and_says_so():
    run = gradcli("check", sample("fake_quant.py"), "--json", "--rtol", "1e-3")
    model = run.result["models"][0]
    assert model["dtype"] == "float32"
    assert any("does not run in float64" in n for n in model["notes"])


def test_native_dtype_keeps_float32():
    run = gradcli("check", sample("keras_mlp.py"), "--native-dtype", "--json")
    model = run.result["models"][0]
    assert model["dtype"] == "float32"
    assert model["tolerance"]["rtol"] == 1e-3


def test_set_overrides_an_input_and_scalar_broadcasts():
    # d/dx (x*x) at x = 3 everywhere: J = diag(6, 6), still 2 x 2 elements.
    run = gradcli("check", sample("square.py"), "--set", "x=3", "--json")
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "pass" and pair["compared"] == 4
    worst = pair["worst"]
    (i,), (j,) = worst["output_index"], worst["input_index"]
    assert worst["analytic"] == [[6.0, 0.0], [0.0, 6.0]][i][j]
    assert worst["numeric"] == pytest.approx(worst["analytic"], abs=1e-8)


def test_set_scalar_reaches_every_element():
    # The buggy sample, sum(softplus(x)**2), at x = 3 everywhere: every element fails, and
    # each one shows the values at x = 3. True derivative 2 softplus(3) sigmoid(3); the
    # buggy gradient multiplies sigmoid by (1 + 1e-3 x).
    run = gradcli("check", sample("buggy_custom_gradient.py"), "--set", "x=3", "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["compared"] == 3 and pair["n_failing"] == 3
    sigmoid, softplus = 1 / (1 + np.exp(-3.0)), np.log1p(np.exp(3.0))
    for element in pair["failing"]:
        assert element["numeric"] == pytest.approx(2 * softplus * sigmoid, rel=1e-9)
        assert element["analytic"] == pytest.approx(2 * softplus * sigmoid * 1.003, rel=1e-12)
    assert sorted(e["input_index"] for e in pair["failing"]) == [[0], [1], [2]]


def test_folder_checks_every_model(tmp_path):
    for name in ("square.py", "two_by_two.py"):
        (tmp_path / name).write_text((__import__("pathlib").Path(sample(name))).read_text())
    run = gradcli("check", tmp_path, "--json")
    assert run.exit_code == 0, run
    assert len(run.result["models"]) == 2


# -- exit codes and one-line messages --------------------------------------------------


@pytest.mark.parametrize(
    "model, message",
    [
        ("syntax_error.py", "syntax_error.py:3: syntax error: expected ':'"),
        ("raises_on_import.py", "raises_on_import.py:4: RuntimeError while importing the model file: weights file missing"),
        ("no_model.py", "no_model.py: defines no `model`"),
        ("not_callable.py", "not_callable.py: `model` is a int, not a callable or Keras model"),
        ("no_inputs.py", "no_inputs.py: defines no `inputs`"),
        ("forward_raises.py", "forward_raises.py:5: forward pass raised InvalidArgumentError"),
        # A tf.function's runtime error: the cause, not TensorFlow's "Graph execution error:" header
        ("edge_graph_error.py", "edge_graph_error.py: forward pass raised InvalidArgumentError: assertion "
         "failed: [x must be positive.  ] [Condition x > 0 did not hold element-wise:]"),
        ("nan_output.py", "nan_output.py: output 'output' is nan at element [1] at the given point"),
        ("integer_inputs.py", "integer_inputs.py: nothing floating to differentiate (inputs: n (int64), k (int64))"),
    ],
)
def test_model_problems_exit_3_with_one_line(model, message):
    run = gradcli("check", fixture(model))
    assert run.exit_code == 3, run
    line = error_line(run)
    assert line.startswith("Error: ") and message in line


def test_missing_entry_name_exits_3():
    run = gradcli("check", sample("square.py") + ":nonesuch")
    assert run.exit_code == 3, run
    assert "no name 'nonesuch' (callables defined: model)" in error_line(run)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mode", "wavy"], "Invalid value for '--mode': 'wavy' is not one of 'auto', 'full', 'fast'."),
        (["--set", "y=1"], "unknown input for --set 'y' (known: x)"),
        (["--set", "x=[1, 2, 3]"], "--set x has shape [3], expected [2] (or a scalar)"),
        (["--set", "x=abc"], "--set x: 'abc' is not a number, a JSON array or @FILE.npy / @FILE.npz:KEY"),
        (["--set", "x"], "--set takes NAME=VALUE, got 'x'"),
        (["--set", "x=@missing.npy"], "--set x: no such file 'missing.npy'"),
        (["--wrt", "z"], "--wrt: unknown input 'z' (known: x)"),
        (["--rtol", "-1"], "Invalid value for '--rtol': must be >= 0, got -1.0 (see 'gradcli check --help')"),
        (["--probes", "0"], "Invalid value for '--probes'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message):
    run = gradcli("check", sample("square.py"), *args)
    assert run.exit_code == 2, run
    assert message in error_line(run)


def test_integer_wrt_is_a_usage_error():
    run = gradcli("check", fixture("integer_inputs.py"), "--wrt", "n")
    assert run.exit_code == 2, run
    assert "--wrt: input 'n' is int64; only floating-point inputs can be differentiated" in error_line(run)


def test_nan_at_the_point_exits_3():
    run = gradcli("check", sample("square.py"), "--set", "x=[1, NaN]")
    assert run.exit_code == 3, run
    assert "input 'x' is nan at element [1]; gradients need a finite point" in error_line(run)


def test_missing_model_file_exits_2():
    run = gradcli("check", "no/such/model.py")
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: no such model file: no/such/model.py"


def test_npz_values(tmp_path):
    np.savez(tmp_path / "point.npz", x=np.array([0.5, -2.0]), y=np.ones(3))
    run = gradcli("check", sample("square.py"), "--set", f"x=@{tmp_path / 'point.npz'}:x", "--json")
    assert run.exit_code == 0, run
    run = gradcli("check", sample("square.py"), "--set", f"x=@{tmp_path / 'point.npz'}")
    assert run.exit_code == 2
    assert "holds 2 arrays; name one" in error_line(run)


def test_untraceable_model_runs_point_by_point_and_says_so():
    run = gradcli("check", fixture("untraceable.py"), "--json")
    assert run.exit_code == 0, run
    model = run.result["models"][0]
    assert any("one point at a time" in note for note in model["notes"])
    worst = model["pairs"][0]["worst"]
    x = 0.05 * (worst["input_index"][0] + 1)  # the fixture's point
    assert worst["numeric"] == pytest.approx(2 * np.cos(x), rel=1e-9)  # d/dx 2 sum(sin x)


def test_xla_compiled_differences_agree():
    run = gradcli("check", sample("tanh_net.py"), "--xla", "--json")
    assert run.exit_code == 0, run
    assert all(p["max_abs_error"] <= 1e-8 for p in only_pairs(run).values())


def test_float32_round_off_is_inconclusive_not_pass():
    # f = sum(1e4 + 1e-3 x) in float32: the round-off of f (about 6e4 * 1.2e-7 / h)
    # is far above the derivative 1e-3, so no verdict can be drawn from differences.
    run = gradcli("check", fixture("float32_swamped.py"), "--native-dtype", "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "inconclusive" and pair["failed"]
    assert "check in float64" in pair["explanation"]
    # In float64 the same model is resolved and passes: d/dx = 1e-3 exactly.
    run = gradcli("check", fixture("float32_swamped.py"), "--json")
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "pass", run
    assert pair["worst"]["analytic"] == pytest.approx(1e-3, rel=1e-6)


def test_float64_round_off_is_inconclusive_without_advice_to_check_in_float64():
    """f = sum(1e13 + 1e-3 x) in float64: one ulp of f (0.0078) is beyond any
    change a step near the point makes (1e-3 per unit of x). The pair is
    inconclusive, and its advice is not the float32 one: the check already
    computes in float64."""
    run = gradcli("check", fixture("float64_swamped.py"), "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "inconclusive" and pair["failed"], pair
    assert "check in float64" not in pair["explanation"]
    assert "computes in float64 already" in pair["explanation"]
    assert pair["worst"]["analytic"] == pytest.approx(1e-3, rel=1e-12)  # d/dx_i of the sum, exactly


JSON_PAIR_KEYS = {
    "input", "output", "verdict", "failed", "mode", "max_abs_error", "max_rel_error", "fd_error",
    "compared", "worst", "failing", "n_failing", "explanation", "warnings", "reverse_failed",
}


def test_json_schema_is_pinned():
    document = gradcli("check", sample("buggy_custom_gradient.py"), "--json").json()
    assert set(document) == {"schema", "command", "ok", "exit_code", "error", "result"}
    assert document["schema"] == 2 and document["command"] == "check"
    assert document["ok"] is False and document["exit_code"] == 1 and document["error"] is None
    assert set(document["result"]) == {"models", "skipped"}
    model = document["result"]["models"][0]
    assert {"name", "path", "ok", "dtype", "mode", "tolerance", "pairs", "notes", "seconds",
            "evaluations", "error", "error_code"} <= set(model)
    assert set(model["tolerance"]) == {"rtol", "atol", "rule", "resolve"}
    pair = model["pairs"][0]
    assert JSON_PAIR_KEYS <= set(pair)
    assert set(pair["worst"]) == {"output_index", "input_index", "analytic", "numeric",
                                  "abs_error", "rel_error", "fd_error"}


def test_json_for_a_model_that_does_not_load():
    run = gradcli("check", fixture("syntax_error.py"), "--json")
    assert run.exit_code == 3
    model = run.result["models"][0]
    assert model["error"].endswith("syntax error: expected ':'") and model["error_code"] == 3
    assert model["pairs"] == []


def test_fast_mode_checks_forward_mode_too():
    # Reverse mode is right here and forward mode is 0: only the forward-mode
    # probes can see it, and the report says which side disagrees.
    run = gradcli("check", fixture("forward_only_wrong.py"), "--mode", "fast", "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "mismatch" and not pair["reverse_failed"]
    assert pair["explanation"].startswith(
        "forward mode (ForwardAccumulator) disagrees with finite differences; reverse mode agrees"
    )
    # The full check compares reverse mode element by element (2x on the diagonal,
    # right) and forward mode by random probes: both modes, whatever the size.
    run = gradcli("check", fixture("forward_only_wrong.py"), "--mode", "full", "--json")
    assert run.exit_code == 1, run
    pair = only_pairs(run)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["explanation"].startswith(
        "forward mode (ForwardAccumulator) disagrees with finite differences; reverse mode agrees"
    )
    assert pair["max_abs_error"] < 1e-8  # reverse mode agrees element by element
    # Forward mode switched off is said, never silent.
    run = gradcli("check", fixture("forward_only_wrong.py"), "--mode", "full", "--autodiff", "reverse", "--json")
    assert run.exit_code == 0, run
    assert "forward mode (JVPs) not checked: autodiff is 'reverse'" in run.result["models"][0]["notes"]


def test_empty_folder_exits_2_with_one_line(tmp_path):
    run = gradcli("check", tmp_path)
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: no *.py model files in folder {tmp_path}"


def test_vjps_from_one_forward_pass_match_the_closed_form():
    """``autodiff.vjps`` (one tape, a backward pass per cotangent) against
    J^T c in closed form: f(x, w) = (x * w, sum(sin x)); J_x^T c = c0 * w +
    c1 cos x, J_w^T c = c0 * x."""
    import tensorflow as tf

    from gradcli.numerics import autodiff

    x, w = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.5, -2.0])

    def function(values):
        return {"prod": values["x"] * values["w"], "sines": tf.reduce_sum(tf.sin(values["x"]))}

    seeds = [{"prod": np.array([1.0, 2.0, -1.0]), "sines": np.array(0.5)}, {"prod": np.array([0.0, -3.0, 4.0])}]
    first, second = autodiff.vjps(function, {"x": x, "w": w}, ["x", "w"], seeds)
    np.testing.assert_allclose(first["x"], seeds[0]["prod"] * w + 0.5 * np.cos(x), rtol=1e-15)
    np.testing.assert_allclose(first["w"], seeds[0]["prod"] * x, rtol=1e-15)
    np.testing.assert_allclose(second["x"], seeds[1]["prod"] * w, rtol=1e-15)
    np.testing.assert_allclose(second["w"], seeds[1]["prod"] * x, rtol=1e-15)
    single = autodiff.vjp(function, {"x": x, "w": w}, ["x", "w"], seeds[1])
    np.testing.assert_array_equal(single["x"], second["x"])


def test_notes_name_a_few_inputs_and_count_the_rest():
    from gradcli.model.core import LISTED_NAMES, name_list

    assert name_list(["a", "b"]) == "a, b"
    names = [f"w{i}" for i in range(LISTED_NAMES + 5)]
    assert name_list(names) == ", ".join(names[:LISTED_NAMES]) + " and 5 more"


@pytest.mark.parametrize("budgets, escalated", [(3.0, True), (5.0, False)])
def test_a_sample_that_shows_no_wrong_element_escalates_within_four_budgets(monkeypatch, budgets, escalated):
    """fast_wrong_kernel_column.py's column 0 is wrong (0.9 times the true
    dy/dW = x^T (1 - tanh(x W)^2)). The full re-check is predicted at
    ``budgets`` budgets (a fixed prediction: the rule, not the machine's
    load, is under test) and the sample is made to miss column 0: it shows no
    wrong element. Within 4 budgets every element is re-checked and column 0
    is shown; beyond, the failing projections stand."""
    from gradcli.analyses import check
    from gradcli.model.loading import load_model
    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.options import CheckOptions

    budget = 1.0
    monkeypatch.setattr(FiniteDifferences, "predict_axes_seconds", lambda self, names, beyond=None: budgets * budget)
    real = check.FastCheck.sampled_pairs

    def blind(self, name, outputs, drawn, seconds, *rest):  # a sample of the right columns only
        return real(self, name, outputs, drawn[np.asarray(drawn) % 64 != 0], seconds, *rest)

    monkeypatch.setattr(check.FastCheck, "sampled_pairs", blind)
    model = load_model(fixture("fast_wrong_kernel_column.py"))
    result = check.check_model(model, CheckOptions(mode="fast", budget=budget))
    w = next(p for p in result.pairs if p.input == "w")
    assert w.failed and next(p for p in result.pairs if p.input == "x").verdict == "pass"
    if not escalated:
        assert w.mode == "fast" and any("the fast result is shown" in n for n in w.warnings), w
        return
    assert any("showed none outside tolerance; all 4096" in n for n in w.warnings), w.warnings
    assert w.verdict == "mismatch" and w.compared == 4096 and w.n_failing == 64
    x, weights = model.point["x"], model.point["w"]
    true = x.T @ (1.0 - np.tanh(x @ weights) ** 2)
    for element in w.failing:
        i, j = element.input_index
        assert j == 0
        assert element.numeric == pytest.approx(true[i, j], rel=1e-6)
        assert element.analytic == pytest.approx(0.9 * true[i, j], rel=1e-9)


@pytest.mark.parametrize("file, wrong, sampled", [
    ("fast_wrong_kernel_column.py", ["w"], 2048),
    ("fast_two_wrong_kernels.py", ["w1", "w2"], 1024),
])
def test_the_failing_inputs_re_checks_share_the_budget(monkeypatch, file, wrong, sampled):
    """Every wrong input's kernel gradient is 0.9 times the true one in column
    0 (closed form: dy/dW = x^T (1 - tanh(x W)^2)). A fixed prediction (the
    rule, not the machine's load, is under test) of 2^-11 s per element: all
    4,096 elements of an input take 2 s against a budget of 1 s. One failing
    input has the whole budget, a sample of 4096 * 1 / 2 = 2048 elements; two
    share it, 4096 * (1/2) / 2 = 1024 each, and say so. Each sample names
    only column-0 elements, at their closed-form values."""
    from gradcli.analyses import check
    from gradcli.model.loading import load_model
    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.options import CheckOptions

    monkeypatch.setattr(FiniteDifferences, "predict_axes_seconds",
                        lambda self, names, beyond=None: 2.0**-11 * sum(self.point[n].size for n in names))
    model = load_model(fixture(file))
    result = check.check_model(model, CheckOptions(mode="fast", budget=1.0))
    pairs = {p.input: p for p in result.pairs}
    assert pairs["x"].verdict == "pass"
    x = model.point["x"]
    for name in wrong:
        pair = pairs[name]
        assert pair.verdict == "mismatch" and pair.compared == sampled, pair
        (note,) = [n for n in pair.warnings if "drawn at random" in n]
        shared = "its 0.5 s share of the 1 s budget, which the re-checks of 2 failing inputs share"
        assert (shared in note) == (len(wrong) == 2) and ("over the 1 s budget" in note) == (len(wrong) == 1), note
        true = x.T @ (1.0 - np.tanh(x @ model.point[name]) ** 2)
        assert pair.failing
        for element in pair.failing:
            i, j = element.input_index
            assert j == 0
            assert element.numeric == pytest.approx(true[i, j], rel=1e-6)
            assert element.analytic == pytest.approx(0.9 * true[i, j], rel=1e-9)


@pytest.mark.parametrize("seed, first_names", [(0, True), (2, False)])
def test_a_sample_the_floor_raised_checks_what_the_share_buys_first(monkeypatch, seed, first_names):
    """W's kernel gradient is 0.9 times the true one in column 0 (closed form:
    dy/dW = x^T (1 - tanh(x W)^2)). A fixed prediction (the rule, not the
    machine's load, is under test) of 2^-11 s per element: all 4,096 take 2 s
    against a budget of 1/16 s, which buys 128 elements; the floor raises the
    sample to 256 (``MIN_SAMPLED``). Its first 128 are checked first
    (``SHOWN_FIRST``' rule). The draws are the rule's own
    (``default_rng([seed, 4])``): at seed 0 the first 128 hold a column-0
    element, and they stand; at seed 2 they hold none, and the whole sample
    is checked, its first 128 elements' first pass evaluated once. Either way
    the failing elements are exactly the checked column-0 elements, at their
    closed-form values."""
    from gradcli.analyses import check
    from gradcli.model.loading import load_model
    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.options import CheckOptions

    monkeypatch.setattr(FiniteDifferences, "predict_axes_seconds",
                        lambda self, names, beyond=None: 2.0**-11 * sum(self.point[n].size for n in names))
    first_pass = []  # (row, step) of every first-pass chunk evaluated for a function of W's sample
    chunk = FiniteDifferences._chunk

    def recorded(self, group, kind, part, steps, *args, **kwargs):
        if group == ("w",) and kind == "axes" and self.point["w"].ndim == 1:
            first_pass.extend(zip(np.asarray(part).tolist(), np.asarray(steps).tolist()))
        return chunk(self, group, kind, part, steps, *args, **kwargs)

    monkeypatch.setattr(FiniteDifferences, "_chunk", recorded)
    model = load_model(fixture("fast_wrong_kernel_column.py"))
    result = check.check_model(model, CheckOptions(mode="fast", budget=1 / 16, rng_seed=seed))
    w = next(p for p in result.pairs if p.input == "w")
    drawn = np.random.default_rng([seed, 4]).choice(4096, 256, replace=False)
    assert (np.count_nonzero(drawn[:128] % 64 == 0) > 0) == first_names  # the draws the test is about
    checked = drawn[:128] if first_names else drawn
    assert w.verdict == "mismatch" and w.compared == len(checked), w
    (note,) = [n for n in w.warnings if "drawn at random" in n]
    assert f"comparison of {len(checked)} of its 4096 elements" in note, note
    x = model.point["x"]
    true = x.T @ (1.0 - np.tanh(x @ model.point["w"]) ** 2)
    wrong = sorted(divmod(int(i), 64) for i in checked if i % 64 == 0)
    assert sorted(tuple(e.input_index) for e in w.failing) == wrong
    for element in w.failing:
        i, j = element.input_index
        assert element.numeric == pytest.approx(true[i, j], rel=1e-6)
        assert element.analytic == pytest.approx(0.9 * true[i, j], rel=1e-9)
    # The first pass along each checked element, at its step, once.
    steps = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=["w"]).axis_steps("w", drawn)
    taken = [(row, step) for row, step in first_pass if step == steps[row]]
    assert sorted(taken) == sorted(zip(range(len(checked)), steps[: len(checked)].tolist()))


def test_a_failing_pair_too_large_to_recheck_in_the_budget_is_shown_on_a_sample():
    """W's kernel gradient is 0.9 times the true one in column 0 (closed form:
    dy/dW = x^T (1 - tanh(x W)^2)); re-checking all 4,096 elements would not
    fit a 0.05 s budget, so a random sample is: every element it finds wrong
    is in column 0, off by exactly the factor 0.9."""
    run = gradcli("check", fixture("fast_wrong_kernel_column.py"), "--mode", "fast", "--budget", "0.05", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    pairs = {p["input"]: p for p in model["pairs"]}
    w = pairs["w"]
    assert w["failed"] and w["verdict"] == "mismatch" and pairs["x"]["verdict"] == "pass"
    (note,) = [n for n in w["warnings"] if "drawn at random" in n]
    sampled = int(note.split("comparison of ")[1].split(" of its 4096")[0])
    # The floor (256), or on a machine where the budget buys fewer, the part
    # it buys when that names elements (SHOWN_FIRST's rule: the test above).
    assert (256 <= sampled or (64 <= sampled and w["n_failing"] > 0)) and sampled < 4096
    assert w["compared"] == sampled
    assert w["n_failing"] > 0 and w["failing"]
    from gradcli.model.loading import load_model

    point = load_model(fixture("fast_wrong_kernel_column.py")).point
    x, weights = point["x"], point["w"]
    true = x.T @ (1.0 - np.tanh(x @ weights) ** 2)
    for element in w["failing"]:
        i, j = element["input_index"]
        assert j == 0
        assert element["numeric"] == pytest.approx(true[i, j], rel=1e-6)
        assert element["analytic"] == pytest.approx(0.9 * true[i, j], rel=1e-9)
