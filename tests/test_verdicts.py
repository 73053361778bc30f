"""Verdicts on the classes of issue 11: NaN never passes, a raising gradient,
NaN at the point, exact zeros, kinks that the central difference hides, fast
mode's power, and a table that agrees with itself.

Expected numbers come from closed forms in the fixture docstrings (one-sided
slopes, derivatives, the product-of-normals law via scipy), or from source lines
read from the fixture files; never from gradcli's own output."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import check_json, fixture, gradcli, line_of, pairs, sample


# -- class 1: NaN/Inf never passes ----------------------------------------------


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_nan_second_derivative_is_never_a_pass(mode):
    # d2/dx2 |x|**1.5 = 0.75 |x|**-0.5: unbounded at 0, TensorFlow gives NaN;
    # at x = 1 it is 0.75 (the first derivative 1.5 |x|**0.5 sign x is right).
    run, doc = check_json(fixture("verdict_second_order_nan.py"), "--order", "2", "--mode", mode)
    assert run.exit_code == 1, run
    found = pairs(doc)
    first = found[("x", "output")]
    assert first["verdict"] == "pass"
    second = found[("x", "d(output)/dx")]
    assert second["failed"] and second["verdict"] == "mismatch"
    assert "not finite (nan)" in second["explanation"]
    assert second["max_abs_error"] == "nan" and second["worst"]["analytic"] == "nan"


def test_second_derivative_away_from_the_singularity_is_right():
    # The same model at x = (2, 1): second derivatives 0.75 / sqrt(2) and 0.75.
    run, doc = check_json(fixture("verdict_second_order_nan.py"), "--order", "2", "--set", "x=[2.0, 1.0]")
    assert run.exit_code == 0, run
    second = pairs(doc)[("x", "d(output)/dx")]
    assert second["verdict"] == "pass"
    assert abs(second["worst"]["numeric"]) in (
        pytest.approx(0.75 / math.sqrt(2), rel=1e-8), pytest.approx(0.75, rel=1e-8), 0.0
    )


def test_fast_mode_analytic_nan_does_not_pass():
    # tf.norm at 0: NaN gradient. Fast mode used to pass it (exit 0); now the
    # projection is not comparable, the pair is re-checked in full, and the
    # genuine singularity is named: exit 3, the same as full mode.
    path = fixture("verdict_norm_at_zero.py")
    for mode in ("fast", "full"):
        run = gradcli("check", path, "--mode", mode)
        assert run.exit_code == 3, run
        assert "is nan at the point, a genuine singularity" in run.stderr
        assert "left -1, right 1" in run.stderr
        assert run.stderr.count("\n") == 1


def test_comparable_is_the_one_rule():
    from gradcli.results import Tolerance
    from gradcli.verdicts import compare

    tol = Tolerance(rtol=1e-6, atol=1e-9, rule="test")
    numeric = np.array([[1.0, 2.0]])
    for bad in (np.nan, np.inf, -np.inf):
        pair = compare.compare_block(
            "x", "y", np.array([[1.0, bad]]), numeric, np.zeros((1, 2)), (), (2,), tol
        )
        assert pair.failed and pair.verdict == "mismatch" and pair.n_failing == 1
        assert pair.worst.input_index == [1]
        # numeric side not finite: nothing can be confirmed
        pair = compare.compare_block(
            "x", "y", numeric, np.array([[1.0, bad]]), np.zeros((1, 2)), (), (2,), tol
        )
        assert pair.failed and pair.verdict == "inconclusive"
        # projections too
        pair = compare.compare_projections(
            "x", "y", np.array([1.0, bad]), None, np.array([1.0, 2.0]), np.zeros(2),
            np.ones(2), tol,
        )
        assert pair.failed and pair.reverse_failed and pair.verdict == "mismatch"


# -- class 2: a gradient function that raises ------------------------------------


def test_gradient_that_raises_is_exit_3_with_op_and_line():
    path = fixture("verdict_gradient_raises.py")
    line = line_of(path, "tf.linalg.inv(")
    made = line_of(path, "scale(a))")  # the op whose gradient function raised
    for mode in ("full", "fast"):
        run = gradcli("check", path, "--mode", mode)
        assert run.exit_code == 3, run
        assert run.stderr == (
            f"Error: tests/models/verdict_gradient_raises.py:{line}: computing the gradient "
            f"of op 'IdentityN' (tf.custom_gradient scale, made at "
            f"tests/models/verdict_gradient_raises.py:{made}) "
            "raised InvalidArgumentError in op MatrixInverse: Input is not invertible.\n"
        )
        assert "Traceback" not in run.stdout + run.stderr
    run, doc = check_json(path)
    assert doc["exit_code"] == 3 and doc["result"]["models"][0]["error_code"] == 3
    assert "MatrixInverse" in doc["result"]["models"][0]["error"]


# -- class 3: NaN at the point -------------------------------------------------


def test_where_with_nan_branch_is_a_mismatch_naming_the_op():
    # y = 0 around x = -1 (slopes 0 and 0), but log(-1) = NaN leaks into the gradient.
    path = fixture("verdict_where_nan.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["failed"]
    text = pair["explanation"]
    assert "not finite where the function is smooth" in text
    assert "(left 0, right 0)" in text
    assert f"Log at tests/models/verdict_where_nan.py:{line_of(path, 'tf.math.log')}" in text
    # The derivative at x[0] = 1.5 is log(1.5) + 1, exactly.
    diagonal = {tuple(e["input_index"]): e for e in pair["failing"]}
    assert (1,) in diagonal and diagonal[(1,)]["numeric"] == pytest.approx(0.0, abs=1e-9)


def test_genuine_singularity_names_the_first_nonfinite_op():
    path = fixture("verdict_norm_at_zero.py")
    run = gradcli("check", path)
    assert run.exit_code == 3, run
    assert (
        f"the first non-finite value comes from SqrtGrad in the gradient of Sqrt at "
        f"tests/models/verdict_norm_at_zero.py:{line_of(path, 'tf.norm(x)')}"
    ) in run.stderr


def test_unbounded_slope_is_a_singularity():
    # sqrt at 0: the right slope grows without bound, the left side is NaN.
    run = gradcli("check", fixture("diag_nan_grad.py"))
    assert run.exit_code == 3, run
    assert "is inf at the point, a genuine singularity" in run.stderr
    assert "SqrtGrad in the gradient of Sqrt" in run.stderr


def test_nonfinite_difference_names_the_step_and_the_op():
    # log(x) at x = 1e-7: x - h < 0 with h = eps**(1/3) = 6.06e-6, log of it is NaN.
    path = fixture("diag_nan_numeric.py")
    run = gradcli("check", path)
    assert run.exit_code == 3, run
    h = np.finfo(np.float64).eps ** (1 / 3)
    assert f"(at x[1] - 1 h (h = {h:.3g}); the first non-finite value comes from Log at " \
        f"tests/models/diag_nan_numeric.py:{line_of(path, 'tf.math.log')})" in run.stderr


# -- class 5: exactly zero ---------------------------------------------------------


def test_exact_zero_is_zero_with_its_resolution():
    # In float64 TensorFlow's d/db is round-off (about 1e-17), not exactly 0: a pass.
    run, doc = check_json(fixture("verdict_zero_float32.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("b", "output")]
    assert not pair["failed"] and abs(pair["worst"]["analytic"]) < 1e-15
    run, doc = check_json(fixture("verdict_zero_float32.py"), "--native-dtype")
    assert run.exit_code == 0, run
    assert doc["result"]["models"][0]["dtype"] == "float32"
    pair = pairs(doc)[("b", "output")]
    assert pair["verdict"] == "zero" and not pair["failed"]
    assert pair["worst"]["analytic"] == 0.0
    assert pair["resolution"] > 0 and abs(pair["worst"]["numeric"]) <= pair["resolution"]
    assert f"resolution {pair['resolution']:.3g}" in pair["explanation"]


def test_exact_zeros_do_not_make_a_pair_inconclusive():
    from gradcli.results import Tolerance
    from gradcli.verdicts import compare

    # Element 0: exactly zero analytically, numeric noise 0.02 within its
    # resolution 2 * 0.02; element 1: 0.1, resolved to 1e-4. Before, the noisy
    # zero's error estimate (0.04) was weighed against the largest derivative
    # (0.1 * 0.1): inconclusive, although both elements are confirmed.
    tol = Tolerance(rtol=1e-3, atol=1e-5, rule="float32")
    pair = compare.compare_block(
        "w", "y", np.array([[0.0, 0.1]]), np.array([[0.02, 0.1]]),
        np.array([[0.02, 1e-4]]), (), (2,), tol,
    )
    assert pair.verdict == "pass", pair.explanation
    # The same noise on a non-zero analytic value is not confirmed: inconclusive.
    pair = compare.compare_block(
        "w", "y", np.array([[0.01, 0.1]]), np.array([[0.02, 0.1]]),
        np.array([[0.02, 1e-4]]), (), (2,), tol,
    )
    assert pair.verdict == "inconclusive" and pair.failed, pair.explanation


# -- class 7: kinks --------------------------------------------------------------


def test_max_tie_kink_is_reported_although_central_difference_agrees():
    # max(1, 3, 3): along x[1] and x[2] the slopes are 0 (left) and 1 (right);
    # TensorFlow gives 0.5, which is between: a valid subgradient.
    run, doc = check_json(fixture("verdict_max_tie.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "kink" and not pair["failed"] and pair["n_kinks"] == 2
    for k in pair["kinks"]:
        assert k["input_index"] in ([1], [2])
        assert (k["left"], k["right"], k["analytic"]) == pytest.approx((0.0, 1.0, 0.5), abs=1e-7)
        assert k["subgradient"]


def test_zero_gradient_on_a_kink_is_a_kink():
    # |x| at 0: TensorFlow's 0 and the central difference 0 agree; the slopes are -1 and 1.
    run, doc = check_json(fixture("verdict_abs_at_zero.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "kink" and not pair["failed"] and pair["resolution"] is None
    (k,) = pair["kinks"]
    assert (k["left"], k["right"], k["analytic"]) == pytest.approx((-1.0, 1.0, 0.0), abs=1e-9)
    assert not any("is zero" in w for w in pair["warnings"])


def test_linear_region_narrower_than_the_step_is_not_a_kink():
    # relu(x + 5e-7) at 0: slope 1 on (-5e-7, inf); the kink is inside the step only.
    run, doc = check_json(fixture("verdict_narrow_linear.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass" and pair["n_kinks"] == 0 and pair["kinks"] == []
    assert any("not at the point" in w for w in pair["warnings"])


def test_smooth_models_have_no_kinks():
    for name in ("tanh_net.py", "rosenbrock.py", "keras_mlp.py"):
        run, doc = check_json(sample(name))
        assert run.exit_code == 0, run
        # (rosenbrock's point is its minimum: a zero gradient there, not a kink)
        assert all(p["n_kinks"] == 0 and p["verdict"] in ("pass", "zero") for p in pairs(doc).values()), name


# -- class 8: fast mode's power -----------------------------------------------------


def test_product_quantile_against_the_bessel_law():
    from scipy import integrate, special

    from gradcli.verdicts import compare

    # |Z1 Z2| has density (2 / pi) K0(t) on t > 0.
    for probes in (1, 3, 8):
        q = compare.product_quantile(probes)
        cdf = integrate.quad(lambda t: 2.0 / math.pi * special.k0(t), 0.0, q)[0]
        assert cdf**probes == pytest.approx(1.0 - compare.DETECT_PROBABILITY, rel=1e-6)


def test_one_element_wrong_by_a_tenth_of_a_percent_fails_in_fast_mode():
    import gradcli

    path = fixture("verdict_fast_one_element.py")
    for seed in (0, 1, 2):
        result = gradcli.check(path, rng_seed=seed, mode="fast")
        (model,) = result.models
        assert model.mode == "fast"
        (pair,) = model.pairs
        # The statement says an error of this size is seen: dy[17]/dW[17, 42] =
        # (1 - tanh(z_17)**2) x_42, off by 1e-3 of itself.
        power = pair.power
        assert power is not None and power.probability == 0.95
        assert pair.failed and pair.verdict == "mismatch", pair.explanation
        (worst,) = pair.failing[:1]
        assert worst.input_index == [17, 42] and worst.output_index == [17]
        assert worst.rel_error == pytest.approx(1e-3, rel=1e-3)
        # ... and the statement says an error of that size is seen.
        assert power.absolute < abs(worst.numeric) * 1e-3


def test_correct_model_passes_fast_mode_and_states_its_power():
    run, doc = check_json(fixture("verdict_fast_one_element.py"), "--set", "error=0", "--mode", "fast")
    assert run.exit_code == 0, run
    (model,) = doc["result"]["models"]
    (pair,) = model["pairs"]
    assert model["mode"] == "fast" and pair["verdict"] == "pass"
    power = pair["power"]
    # W has 6000 elements, y 60: the RMS element is ||J||_F / sqrt(60 * 6000).
    assert power["absolute"] < 1e-3 and power["relative"] == pytest.approx(
        power["absolute"] / power["element_size"]
    )
    text = gradcli("check", fixture("verdict_fast_one_element.py"), "--set", "error=0", "--mode", "fast")
    assert "3 random projections would see a single element off by" in text.stdout


def test_power_statement_holds_by_monte_carlo():
    """The stated detection probability, checked by simulation of the rule itself:
    one element of J off by the stated absolute error, random probes."""
    from gradcli.results import Tolerance
    from gradcli.verdicts import compare

    rng = np.random.default_rng(5)
    m, n, probes = 4, 50, 3
    J = rng.standard_normal((m, n))
    tol = Tolerance(rtol=1e-6, atol=1e-9, rule="float64")
    detected, trials = 0, 2000
    statement = None
    for _ in range(trials):
        u, v = rng.standard_normal((probes, n)), rng.standard_normal((probes, m))
        ju, jtv = u @ J.T, v @ J
        scale, roundoff = compare.projection_scale(*map(compare.squared_norms, (u, v, ju, jtv)), np.float64)
        if statement is None:
            allowed = compare.projection_allowed(
                0.0, scale, tol, roundoff, np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1),
            )
            statement = compare.detectable_error(float(np.max(allowed)), probes, 1.0)
        wrong = J.copy()
        wrong[1, 7] += statement.absolute * 1.01
        pair = compare.compare_projections(
            "x", "y", np.sum(u * (v @ wrong), axis=1), None, np.sum(v * ju, axis=1),
            np.zeros(probes), scale, tol, roundoff,
            np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1),
        )
        detected += pair.failed
    assert detected / trials >= 0.93  # 0.95 up to the spread of the allowance and sampling


# -- class 9: the table agrees with itself ------------------------------------------


@pytest.mark.parametrize("name", ["fake_quant.py", "round_cast.py", "buggy_custom_gradient.py", "kinks.py"])
def test_worst_element_leads_the_failing_list_and_max_abs_error_bounds_them(name):
    run, doc = check_json(sample(name))
    for pair in pairs(doc).values():
        if pair["worst"] is None:
            continue
        # one order, error / allowed: the worst element is the first failing one
        if pair["failing"]:
            assert pair["worst"] == pair["failing"][0], pair
        assert pair["worst"]["abs_error"] <= pair["max_abs_error"], pair
        assert all(e["abs_error"] <= pair["max_abs_error"] for e in pair["failing"])


def test_auto_runs_the_6000_element_model_in_full_and_names_the_wrong_element():
    """auto now picks by predicted time (the speed issue): 6,000 elements fit the
    default budget, so the one wrong element W[17, 42] is found element by element."""
    import gradcli

    (model,) = gradcli.check(fixture("verdict_fast_one_element.py")).models
    assert model.mode == "full" and any("auto ran the full check" in n for n in model.notes)
    (pair,) = model.pairs
    assert pair.failed and pair.n_failing == 1
    assert (pair.failing[0].output_index, pair.failing[0].input_index) == ([17], [17, 42])


def test_flat_region_narrower_than_the_step_passes():
    # relu(x - 5e-7) at 0: constant on (-inf, 5e-7), analytic 0; the central
    # difference sees the kink inside the step. The ladder's slopes are 0 on
    # both sides (constant), agreeing with the analytic 0: a pass at a better step.
    run, doc = check_json(fixture("verdict_narrow_flat.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] in ("pass", "zero") and pair["n_kinks"] == 0 and pair["n_surrogate"] == 0
    assert any("not at the point" in w for w in pair["warnings"])
