"""Diagnoses: kink, surrogate, zero, disconnected, nondeterminism, NaN/Inf,
the culprit op, the Taylor test and `gradcli logdet`.

Expected numbers come from the closed forms in the model files' docstrings
(one-sided slopes, op definition lines found by reading the file), never from
gradcli's own output."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import check_json, fixture, gradcli, line_of, only_model, pairs, sample


# -- kink ---------------------------------------------------------------------


def test_relu_exactly_at_zero_passes_with_kinks_reported():
    run, doc = check_json(sample("relu_at_zero.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("W", "output")]
    assert pair["verdict"] == "kink" and not pair["failed"]
    # W x = [0, 1.5, 0, -2]: rows 0 and 2 sit at 0; the right slope is x_j = 1.
    assert pair["n_kinks"] == 4
    assert {tuple(k["input_index"]) for k in pair["kinks"]} == {(0, 0), (0, 1), (2, 0), (2, 1)}
    for k in pair["kinks"]:
        assert k["output_index"][0] == k["input_index"][0]
        assert k["left"] == pytest.approx(0.0, abs=1e-9)
        assert k["right"] == pytest.approx(1.0, rel=1e-7)
        assert k["analytic"] == 0.0 and k["subgradient"]


def test_relu_kinks_text_report_shows_slopes():
    run = gradcli("check", sample("relu_at_zero.py"))
    assert run.exit_code == 0, run
    assert "kink W -> output: 4 elements" in run.stdout
    assert "output[0] / W[0, 0]: left 0, right 1, analytic 0 (valid subgradient)" in run.stdout


def test_fast_mode_on_a_kink_is_not_a_failure():
    run = gradcli("check", sample("relu_at_zero.py"), "--mode", "fast", "--json")
    assert run.exit_code == 0, run
    assert pairs(run.json())[("W", "output")]["verdict"] == "kink"


def test_other_kinks_max_tie_and_hinge_margin():
    run, doc = check_json(sample("kinks.py"))
    assert run.exit_code == 0, run
    found = pairs(doc)
    (tie,) = found[("b", "max")]["kinks"]
    # max(b, c) at b = c: slopes 0 from the left, 1 from the right; TensorFlow gives 1.
    assert (tie["left"], tie["right"], tie["analytic"]) == pytest.approx((0.0, 1.0, 1.0), abs=1e-7)
    (hinge,) = found[("w", "hinge")]["kinks"]
    # relu(1 - w t) at w t = 1, t = 2: slopes -2 (left) and 0 (right).
    assert (hinge["left"], hinge["right"]) == pytest.approx((-2.0, 0.0), abs=1e-7)
    assert hinge["subgradient"]
    # |a| at 0: the symmetric central difference 0 equals TensorFlow's 0, but the
    # one-sided slopes are -1 and 1 (issue 11, class 7: kinks never pass silently).
    absolute = found[("a", "abs")]
    assert absolute["verdict"] == "kink" and not absolute["failed"]
    (k,) = absolute["kinks"]
    assert (k["left"], k["right"], k["analytic"]) == pytest.approx((-1.0, 1.0, 0.0), abs=1e-7)
    assert k["subgradient"]


def test_analytic_outside_the_slopes_is_a_failing_kink():
    run, doc = check_json(fixture("diag_bad_subgradient.py"))
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "kink" and pair["failed"]
    (k,) = pair["kinks"]
    assert k["input_index"] == [0] and not k["subgradient"]
    assert (k["left"], k["right"], k["analytic"]) == pytest.approx((0.0, 1.0, 2.0), abs=1e-7)


# -- surrogate ----------------------------------------------------------------


def test_fake_quant_args_is_a_surrogate_and_fails():
    run, doc = check_json(fixture("diag_fake_quant_args.py"))
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "surrogate" and pair["failed"]
    assert pair["n_surrogate"] == 3 and pair["n_failing"] == 0
    assert "piecewise constant" in pair["explanation"]


def test_allow_surrogate_passes_and_still_says_so():
    run, doc = check_json(fixture("diag_fake_quant_args.py"), "--allow-surrogate")
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "surrogate" and not pair["failed"]
    assert any("allowed by --allow-surrogate" in w for w in pair["warnings"])


def test_fake_quant_with_data_min_max_names_the_several_paths():
    path = sample("fake_quant.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "surrogate"
    (site,) = pair["sites"]
    assert site["op_type"] == "FakeQuantWithMinMaxVars"
    assert "3 paths (inputs, min, max)" in site["description"]
    assert site["location"].endswith(f"fake_quant.py:{line_of(path, 'q = tf.quantization')}")
    assert any("several paths" in w for w in pair["warnings"])
    assert gradcli("check", path, "--allow-surrogate").exit_code == 0


# -- zero and disconnected ------------------------------------------------------


def test_sign_loss_is_zero_with_a_warning_naming_tf_sign():
    path = sample("sign_loss.py")
    run, doc = check_json(path)
    assert run.exit_code == 0, run
    pair = pairs(doc)[("w", "output")]
    assert pair["verdict"] == "zero" and not pair["failed"]
    (warning,) = pair["warnings"]
    assert "tf.sign" in warning and "nothing can be learned" in warning
    assert f"sign_loss.py:{line_of(path, 'tf.sign(')}" in warning


def test_round_and_integer_cast_is_disconnected_and_names_both_ops():
    path = sample("round_cast.py")
    run, doc = check_json(path)
    assert run.exit_code == 0, run
    found = pairs(doc)
    pair = found[("x", "output")]
    assert pair["verdict"] == "disconnected" and not pair["failed"]
    assert [s["op_type"] for s in pair["sites"]] == ["Round", "Cast"]
    line = line_of(path, "tf.round(")
    assert all(s["location"].endswith(f"round_cast.py:{line}") for s in pair["sites"])
    assert "int32" in pair["sites"][1]["description"]
    assert found[("w", "output")]["verdict"] == "pass"


def test_stop_gradient_with_a_moving_output_is_a_failure_that_says_where():
    path = fixture("diag_stop_gradient.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "disconnected" and pair["failed"]
    # d/dx (w * x^2) = 2 w x = [2.1, -2]: the numeric derivative reaches 2.1.
    assert "numeric derivative up to 2.1" in pair["explanation"]
    assert f"tf.stop_gradient at tests/models/diag_stop_gradient.py:{line_of(path, 'stop_gradient(')}" in pair["explanation"]


# -- model cannot be checked ----------------------------------------------------


def test_dropout_is_nondeterministic_exit_3():
    run = gradcli("check", fixture("diag_dropout.py"))
    assert run.exit_code == 3, run
    assert "nondeterministic" in run.stderr and "output output[" in run.stderr
    assert run.stderr.count("\n") == 1


def test_inf_gradient_names_input_output_and_element():
    run = gradcli("check", fixture("diag_nan_grad.py"))
    assert run.exit_code == 3, run
    assert "analytic derivative of output[1] with respect to x[1] is inf" in run.stderr


# -- the culprit ----------------------------------------------------------------


def test_buggy_custom_gradient_three_calls_deep_is_pinpointed():
    path = fixture("diag_deep_custom_gradient.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    for pair in pairs(doc).values():
        culprit = pair["culprit"]
        assert culprit["site"]["description"] == "tf.custom_gradient cube"
        assert culprit["site"]["op_type"] == "IdentityN"
        assert culprit["definition"] == f"tests/models/diag_deep_custom_gradient.py:{line_of(path, 'def cube')}"
        assert culprit["site"]["location"].endswith(f":{line_of(path, 'cube(h * w)')}")
        assert culprit["rel_error"] > 0.1
    text = gradcli("check", path)
    assert f"defined at tests/models/diag_deep_custom_gradient.py:{line_of(path, 'def cube')}" in text.stdout


def test_culprit_of_the_sample_bug_is_its_softplus():
    path = sample("buggy_custom_gradient.py")
    run, doc = check_json(path)
    assert run.exit_code == 1
    culprit = pairs(doc)[("x", "output")]["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient softplus"
    assert culprit["definition"].endswith(f"buggy_custom_gradient.py:{line_of(path, 'def softplus')}")


def test_the_culprit_rel_err_is_the_one_its_two_printed_values_give():
    """The culprit line prints the probe by the op's gradient and by finite
    differences; its rel err is |a - n| / max(|a|, |n|) of those two, as an
    element's, in JSON, the text report and the job summary alike (it was
    relative to the probe's Cauchy-Schwarz scale, which the report never shows)."""
    import re

    from gradcli.render.text import fmt

    path = sample("buggy_custom_gradient.py")
    run, doc = check_json(path)
    culprit = pairs(doc)[("x", "output")]["culprit"]
    a, n = culprit["analytic"], culprit["numeric"]
    assert culprit["rel_error"] == pytest.approx(abs(a - n) / max(abs(a), abs(n)), rel=1e-12)
    text = gradcli("check", path, "--format", "github").stdout
    (line,) = [l for l in text.splitlines() if "for a random probe" in l and not l.startswith("::")]
    shown = re.search(r"gives (\S+) for a random probe, finite differences (\S+) \(rel err (\S+)\)", line)
    a, n = float(shown[1]), float(shown[2])
    assert shown[3] == fmt(abs(a - n) / max(abs(a), abs(n))), line
    (annotation,) = [l for l in text.splitlines() if l.startswith("::") and "culprit" in l]
    assert f"(rel err {shown[3]})" in annotation, annotation


# -- Taylor -------------------------------------------------------------------


def test_taylor_orders_two_for_correct_gradients():
    run, doc = check_json(sample("tanh_net.py"), "--taylor")
    assert run.exit_code == 0, run
    for pair in pairs(doc).values():
        assert pair["taylor"]["order"] == pytest.approx(2.0, abs=0.05)
        assert pair["taylor"]["verdict"] == "second order"


def test_taylor_order_one_for_a_wrong_gradient_shown_without_asking():
    run, doc = check_json(sample("buggy_custom_gradient.py"))
    taylor = pairs(doc)[("x", "output")]["taylor"]
    assert taylor["order"] == pytest.approx(1.0, abs=0.05) and taylor["verdict"] == "first order"
    # r(h) = |s(x + h u) - s(x) - h <g, u>| recomputed from the reported steps is monotone.
    assert taylor["remainders"][-1] < taylor["remainders"][0]
    assert "Taylor remainder x -> output" in gradcli("check", sample("buggy_custom_gradient.py")).stdout


def test_taylor_test_direct_on_a_quadratic():
    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.model.loading import load_model
    from gradcli.verdicts.taylor import taylor_test

    model = load_model(sample("square.py"))
    fd = FiniteDifferences(model.function, model.point, ["output"])
    result = taylor_test(model, fd, "x", "output", seed=3)
    # f = x*x: the remainder is exactly h^2 sum(v u^2): order 2 at every step.
    assert all(o == pytest.approx(2.0, abs=1e-3) for o in result.orders)
    ratios = np.array(result.remainders) / np.array(result.steps) ** 2
    assert np.allclose(ratios, ratios[0], rtol=1e-4)


# -- gradcli logdet -------------------------------------------------------------


def test_logdet_realnvp_agrees():
    run = gradcli("logdet", sample("realnvp_flow.py"), "--json")
    assert run.exit_code == 0, run
    doc = run.json()
    assert doc["ok"] and doc["result"]["batch"] == 5 and doc["result"]["dimension"] == 4
    assert doc["result"]["worst"]["abs_error"] < 1e-12


def test_logdet_finds_the_missing_log2():
    run = gradcli("logdet", fixture("diag_flow_bad_ldj.py"), "--json")
    assert run.exit_code == 1, run
    model = run.result
    assert model["n_failing"] == 2
    for example in model["examples"]:
        assert example["abs_error"] == pytest.approx(math.log(2.0), abs=1e-12)
        # log|det J| = tanh(x0) + log 2 in closed form
        assert example["logabsdet"] == pytest.approx(example["declared"] + math.log(2.0), abs=1e-12)
    text = gradcli("logdet", fixture("diag_flow_bad_ldj.py"))
    assert "FAIL log_det_jacobian disagrees at 2 of 2 examples" in text.stdout


def test_logdet_header_names_mode_and_dtype_and_lists_examples_in_order():
    """The header is the other commands' (``[mode, dtype, ...]``: it was lost
    as rich markup) and the examples come in batch order, 0 to 4 (they came
    worst first: 4, 3, 0, 2, 1)."""
    run = gradcli("logdet", sample("realnvp_flow.py"))
    assert run.exit_code == 0, run
    lines = run.stdout.splitlines()
    assert lines[0] == (
        "sample_models/realnvp_flow.py  [jacobian, float64, rtol=1e-06, atol=1e-09]  x -> output: "
        "slogdet of the autodiff Jacobian, n=4, 5 examples"
    )
    rows = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert rows == ["0", "1", "2", "3", "4"]
    assert [e["index"] for e in gradcli("logdet", sample("realnvp_flow.py"), "--json").result["examples"]] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "args, code, message",
    [
        ((sample("square.py"),), 3, "defines no `log_det_jacobian`"),
        ((sample("two_by_two.py"),), 2, "logdet needs one input to differentiate, got a, b"),
        ((fixture("diag_flow_mixing.py"),), 3, "output example 0 depends on input example 1"),
        ((sample("realnvp_flow.py"), "--output", "nope"), 2, "unknown output 'nope'"),
        ((sample("realnvp_flow.py"), "--rtol", "-1"), 2, "--rtol"),
    ],
)
def test_logdet_errors(args, code, message):
    run = gradcli("logdet", *args)
    assert run.exit_code == code, run
    assert message in run.stderr and run.stderr.startswith("Error:")


def test_check_help_lists_the_new_options():
    run = gradcli("check", "--help")
    assert "--allow-surrogate" in run.stdout and "--taylor" in run.stdout


def test_nan_finite_difference_names_input_output_and_element():
    run = gradcli("check", fixture("diag_nan_numeric.py"))
    assert run.exit_code == 3, run
    assert "finite difference of output[1] with respect to x[1] is nan" in run.stderr
    assert "not finite within a step" in run.stderr


def test_joint_directions_move_every_input_at_once_and_match_the_closed_form():
    # f(a, b) = [sum(a**2) + sum(a * b), sum(sin(b))]: along (u_a, u_b) the
    # derivative is [2 a.u_a + b.u_a + a.u_b, cos(b).u_b] (closed form).
    import tensorflow as tf

    from gradcli.numerics.finite_diff import FiniteDifferences, dense_step_size, machine_eps

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(5), rng.standard_normal((2, 3))
    b5 = b.reshape(-1)[:5]

    def f(v):
        return {"y": tf.stack([tf.reduce_sum(v["a"] ** 2) + tf.reduce_sum(v["a"] * tf.reshape(v["b"], [-1])[:5]),
                               tf.reduce_sum(tf.sin(v["b"]))])}

    fd = FiniteDifferences(f, {"a": a, "b": b}, ["y"], wrt=["a", "b"], joint=True)
    u = {"a": rng.standard_normal((3, 5)), "b": rng.standard_normal((3, 2, 3))}
    d = fd.along_joint(u)
    ub5 = u["b"].reshape(3, -1)[:, :5]
    expected = np.stack([
        u["a"] @ (2 * a + b5) + ub5 @ a,
        u["b"].reshape(3, -1) @ np.cos(b).reshape(-1),
    ], axis=1)
    # Within the engine's own error estimate (round-off of the sqrt(eps) step
    # dominates it), and that estimate is small.
    assert np.all(np.abs(d.values["y"] - expected) <= 2.0 * d.errors["y"] + 1e-12)
    assert np.all(d.errors["y"] < 1e-5)
    # Through non-smooth ops a dense direction steps eps**(1/2) in float64; the
    # smooth rule stays for float32 (and for smooth functions, as above).
    import gradcli.verdicts.excuses as excuses

    relu = tf.function(lambda t: tf.nn.relu(t) * 2.0).get_concrete_function(tf.TensorSpec([3], tf.float64))
    smooth = tf.function(lambda t: tf.sin(t) * 2.0).get_concrete_function(tf.TensorSpec([3], tf.float64))
    assert excuses.has_nonsmooth_op(relu.graph) and not excuses.has_nonsmooth_op(smooth.graph)
    looped = tf.function(  # a relu inside a while loop's body: a function the graph calls
        lambda t: tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, tf.nn.relu(x) * 2.0), (0, t))[1]
    ).get_concrete_function(tf.TensorSpec([3], tf.float64))
    smooth_loop = tf.function(
        lambda t: tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, tf.sin(x)), (0, t))[1]
    ).get_concrete_function(tf.TensorSpec([3], tf.float64))
    assert excuses.has_nonsmooth_op(looped.graph) and not excuses.has_nonsmooth_op(smooth_loop.graph)
    assert dense_step_size(0.5, "float64") == pytest.approx(np.sqrt(machine_eps("float64")))
    assert dense_step_size(0.5, "float32") == pytest.approx(machine_eps("float32") ** (1 / 3))
    # Inputs of two dtypes are not one group: the caller goes input by input.
    mixed = FiniteDifferences(f, {"a": a, "b": b.astype("float32")}, ["y"], wrt=["a", "b"], joint=True)
    assert mixed.along_joint(u) is None


def test_dense_directions_of_a_large_group_run_in_a_traced_loop(monkeypatch):
    # The looped path (points formed inside one traced loop) gives the same
    # derivatives as the eager points, and the closed form: d/dt sum(sin(x + t u)) = cos(x).u
    import tensorflow as tf

    import gradcli.numerics.evaluators as evaluators
    import gradcli.numerics.finite_diff as finite_diff

    rng = np.random.default_rng(5)
    x = rng.standard_normal(50)
    u = {"x": rng.standard_normal((3, 50))}
    results = {}
    for name, threshold in (("eager", 10**12), ("looped", 10)):
        monkeypatch.setattr(evaluators, "LOOPED_MIN_ELEMENTS", threshold)
        fd = finite_diff.FiniteDifferences(
            lambda v: {"y": tf.reduce_sum(tf.sin(v["x"]))}, {"x": x}, ["y"], wrt=["x"], joint=True
        )
        results[name] = fd.along_joint(u)
        assert not fd.eager and (("directions looped" in str(list(fd._compiled))) == (name == "looped"))
    expected = u["x"] @ np.cos(x)
    for d in results.values():
        assert np.all(np.abs(d.values["y"] - expected) <= 2.0 * d.errors["y"] + 1e-12)
    np.testing.assert_allclose(results["looped"].values["y"], results["eager"].values["y"], rtol=1e-12)


def test_fast_check_retries_a_round_off_dominated_projection_at_a_larger_step():
    run, doc = check_json(fixture("fast_roundoff_tiny_gradient.py"), "--mode", "fast")
    assert run.exit_code == 0, run
    pair = pairs(doc)[("w", "output")]
    assert pair["verdict"] == "pass"
    assert any("at 16 times the step they agree" in w and "round-off left the projections inconclusive" in w
               for w in pair["warnings"])


def test_the_full_check_retries_round_off_dominated_elements_at_larger_steps():
    """The same model checked in full: each element's differences are
    round-off at the default step (inconclusive, which failed the correct
    model) and at 16 times it; at 256 times they agree with the analytic
    gradient, whose worst element is the closed form 1e-6 s (1 - s)."""
    run, doc = check_json(fixture("fast_roundoff_tiny_gradient.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("w", "output")]
    assert pair["mode"] == "full" and pair["verdict"] == "pass"
    assert any("round-off left the elements inconclusive" in w and "at 256 times the step they agree" in w
               for w in pair["warnings"]), pair["warnings"]
    w = np.random.default_rng(0).standard_normal(5000)[pair["worst"]["input_index"][0]]
    s = 1.0 / (1.0 + np.exp(-1e-6 * w))
    assert pair["worst"]["analytic"] == pytest.approx(1e-6 * s * (1.0 - s), rel=1e-9)


def test_a_larger_step_past_the_functions_domain_gives_no_pass():
    """3e6 + 1e-9 sum(sqrt(x)) at x of 1e-3: round-off swamps the derivative
    (about 1.6e-8) at the default step and at 16 times it, and 256 times the
    step reaches below 0, where sqrt is NaN. The retry finds no evidence
    there, and the pair stays inconclusive: a failure, never a pass."""
    import gradcli
    import tensorflow as tf

    result = gradcli.check(lambda x: 3e6 + 1e-9 * tf.reduce_sum(tf.sqrt(x)), inputs={"x": np.array([1e-3, 2e-3, 5e-4])})
    (model,) = result.models
    (pair,) = model.pairs
    assert pair.mode == "full" and pair.verdict == "inconclusive" and pair.failed
    assert not pair.warnings and not result.ok


def test_a_derivative_zero_by_an_invariance_is_confirmed_at_a_larger_step():
    """A shift the softmax ignores, in a function of large output: its
    projections are round-off at the default step and at 16 times it, and pass
    at 256 times it, where the truncation is still 0."""
    run, doc = check_json(fixture("fast_roundoff_zero_shift.py"), "--mode", "fast")
    assert run.exit_code == 0, run
    pair = pairs(doc)[("b", "output")]
    assert pair["verdict"] == "pass"
    assert any("at 256 times the step they agree" in w for w in pair["warnings"]), pair["warnings"]


@pytest.mark.parametrize("mode", ["fast", "full"])
def test_a_wrong_derivative_below_the_default_steps_round_off_never_passes_at_a_larger_step(mode):
    """The same function with b's gradient wrong by about 2e-8, under the
    default step's round-off: inconclusive there, and the larger steps that
    resolve it see the error, a mismatch the retry does not trust. The pair
    fails; the analytic values it shows are the leak, 1e-12 of |dy|'s row
    sums (numpy, from the softmax's closed-form derivative)."""
    run, doc = check_json(fixture("fast_roundoff_zero_shift_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("b", "output")]
    assert pair["failed"] and pair["verdict"] in ("inconclusive", "mismatch"), pair["verdict"]
    x = np.random.default_rng(2).standard_normal((6, 16))
    b = np.random.default_rng(3).standard_normal(6)
    w = np.random.default_rng(1).standard_normal((6, 16))
    z = x + b[:, None]
    s = np.exp(z - z.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    dy = 3e4 * s * (w - np.sum(s * w, axis=1, keepdims=True))  # d/dz of 3e4 sum(softmax(z) W)
    leak = 1e-12 * np.abs(dy).sum(axis=1)
    worst = pair["worst"]
    if mode == "full":
        assert worst["analytic"] == pytest.approx(leak[worst["input_index"][0]], rel=1e-6)


def test_a_forward_mode_failure_is_named_without_searching_gradients(monkeypatch):
    # A JVP calls no gradient function, so the message of one that raised does
    # not search the graph for a raising gradient (on an EfficientNet-B0 that
    # search took minutes, op after op, for a warning).
    from gradcli.model.loading import load_model
    from gradcli.verdicts import culprit, diagnose

    def searched(self, exc):
        raise AssertionError("searched for a raising gradient")

    monkeypatch.setattr(culprit.ModelGraph, "raising_gradient", searched)
    model = load_model(sample("square.py"))
    error = diagnose.raised(RuntimeError("OrderedDict mutated during iteration"), model, True, forward=True)
    assert "computing forward mode (a JVP) raised RuntimeError: OrderedDict mutated during iteration" in str(error)


@pytest.mark.parametrize("model, verdict, batches", [
    # Every failing element a mismatch: the first batch settles the verdict.
    ("ladder_wrong_40.py", "mismatch", [8]),
    # Every failing element a kink: all forty examined, in batches doubling from 8.
    ("ladder_kinks_40.py", "kink", [8, 16, 16]),
])
def test_the_ladders_stop_after_the_first_batch_holding_a_sure_mismatch(monkeypatch, model, verdict, batches):
    """The ladders of a failing pair's columns run worst first in batches of 8
    doubling to 64 (``ladder.FIRST_COLUMNS``), and stop after the batch that
    holds an element surely a mismatch: the verdict is then mismatch whatever
    the rest are. Forty wrong elements (custom gradient 4 x**2 for 3 x**2) stop
    after 8 columns, every analytic value 4/3 of the closed form; forty kinks
    (relu at 0) are all examined, each earned."""
    from gradcli.verdicts import ladder

    columns = []
    real = ladder.one_sided_ladder

    def counted(fd, name, output, f0, cols, *args, **kwargs):
        columns.append(len(cols))
        return real(fd, name, output, f0, cols, *args, **kwargs)

    monkeypatch.setattr(ladder, "one_sided_ladder", counted)
    run, doc = check_json(fixture(model), "--mode", "full")
    (pair,) = only_model(doc)["pairs"]
    assert pair["verdict"] == verdict, pair
    assert columns == batches
    x = np.linspace(1.1, 5.0, 40)
    if verdict == "mismatch":
        assert pair["n_failing"] == 40
        for element in pair["failing"]:
            (i,) = element["input_index"]
            assert element["analytic"] == pytest.approx(4 * x[i] ** 2, rel=1e-12)
            assert element["numeric"] == pytest.approx(3 * x[i] ** 2, rel=1e-7)
    else:
        assert pair["n_kinks"] == 40 and pair["n_failing"] == 0 and run.exit_code == 0
        assert all((k["left"], k["right"], k["analytic"]) == (0.0, 1.0, 0.0) for k in pair["kinks"])


def test_a_later_pairs_culprit_search_replays_the_ops_found_right_and_finds_the_same(monkeypatch):
    """Both pairs of culprit_two_inputs.py fail at the wrong rule of ``sq``,
    past the same right ops. The second pair's search takes the first's
    verdict on each op it found right, replaying the draws its check took
    (``culprit.RecordedDraws``), and checks only the rest: fewer local checks,
    and every report (culprit, its figures to the bit) as when each search
    checks every op itself."""
    from gradcli.verdicts import culprit

    checked = []
    real = culprit.check_op

    def counted(graph, op, *args, **kwargs):
        checked.append(op.name)
        return real(graph, op, *args, **kwargs)

    monkeypatch.setattr(culprit, "check_op", counted)
    runs = {}
    for replay in (True, False):
        if not replay:  # no record is fit to replay: every search checks every op
            monkeypatch.setattr(culprit.RecordedDraws, "replayable",
                                property(lambda self: False, lambda self, value: None), raising=False)
        checked.clear()
        run = gradcli("check", fixture("culprit_two_inputs.py"), "--mode", "full", "--json")
        runs[replay] = (run.exit_code, {p["input"]: p for p in only_model(run.json())["pairs"]}, list(checked))
    (code, replayed, fewer), (_, each, all_ops) = runs[True], runs[False]
    assert code == 1 and set(replayed) == {"a", "b"}
    for name in ("a", "b"):
        assert replayed[name]["verdict"] == "mismatch"
        assert "sq" in replayed[name]["culprit"]["site"]["description"]
        assert replayed[name]["culprit"] == each[name]["culprit"]
        assert replayed[name]["failing"] == each[name]["failing"]
    assert len(fewer) < len(all_ops) and set(fewer) <= set(all_ops)
    # Closed form: the rule's 3 h against the truth 2 h, so the analytic
    # derivative is 3/2 of the numeric one at every element.
    a, b = np.linspace(0.3, 1.2, 6), np.linspace(-0.8, 0.9, 6)
    h = np.tanh(a * b) + np.sin(a) * np.cos(b)
    dh_da = (1 - np.tanh(a * b) ** 2) * b + np.cos(a) * np.cos(b)
    for element in replayed["a"]["failing"]:
        (i,) = element["input_index"]
        assert element["analytic"] == pytest.approx(3 * h[i] * dh_da[i], rel=1e-9)
        assert element["numeric"] == pytest.approx(2 * h[i] * dh_da[i], rel=1e-7)
