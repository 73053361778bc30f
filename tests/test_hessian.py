"""gradcli hessian and gradcli check --order 2, against closed-form Hessians."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from conftest import error_line, fixture, fresh_process, gradcli, sample

ROSENBROCK = sample("rosenbrock.py")
LEAST_SQUARES = sample("least_squares.py")
TANH = sample("tanh_net.py")
STOP_GRADIENT = fixture("hess_stop_gradient.py")

TANH_X = np.array([-2.0, -0.5, 0.3, 1.0, 2.5])
TANH_Y = np.array([-1.0, -0.4, 0.2, 0.8, 1.1])


def tanh_hessian(w1, w2):
    """Closed form of the Hessian of sum((w1 tanh(w2 x) - y)^2)."""
    t = np.tanh(w2 * TANH_X)
    s = 1 - t**2
    r = w1 * t - TANH_Y
    h11 = np.sum(2 * t * t)
    h12 = np.sum(2 * w1 * TANH_X * s * t + 2 * r * TANH_X * s)
    h22 = np.sum(2 * (w1 * TANH_X * s) ** 2 - 4 * r * w1 * TANH_X**2 * t * s)
    return np.array([[h11, h12], [h12, h22]])


# -- must-shows ---------------------------------------------------------------------


def test_least_squares_eigenvalues_are_those_of_2_AtA():
    from gradcli.analyses.hessian import HessianOptions, analyse_path
    from gradcli.model.loading import load_model

    A = load_model(LEAST_SQUARES).point["A"]
    result = analyse_path(LEAST_SQUARES, HessianOptions(expect="convex"))
    truth = np.linalg.eigvalsh(2 * A.T @ A)
    np.testing.assert_allclose(result.spectrum.eigenvalues, truth, rtol=1e-8, atol=0)
    np.testing.assert_allclose(result.hessian, 2 * A.T @ A, rtol=1e-12)
    assert result.spectrum.verdict == "positive definite"
    assert result.expectation_met and result.exit_code == 0
    assert not result.fd_check.failed


def test_rosenbrock_at_the_minimum_json():
    run = gradcli("hessian", ROSENBROCK, "--json")
    assert run.exit_code == 0, run
    doc = run.result
    truth = [501 - np.sqrt(250601), 501 + np.sqrt(250601)]  # 0.399360767, 1001.60064
    np.testing.assert_allclose(doc["eigenvalues"], truth, rtol=1e-10)
    assert f"{doc['eigenvalues'][0]:.9f}" == "0.399360767"
    assert f"{doc['eigenvalues'][1]:.5f}" == "1001.60064"
    assert doc["verdict"] == "positive definite"
    assert doc["hessian"] == [[802.0, -400.0], [-400.0, 200.0]]
    assert doc["labels"] == ["x", "y"]
    assert doc["symmetry_error"] == 0.0
    assert doc["condition_number"] == pytest.approx(truth[1] / truth[0], rel=1e-9)
    assert doc["trace"] == {"estimate": 1002.0, "stderr": 0.0, "probes": 0, "method": "exact"}
    assert doc["fd_check"]["ok"] and doc["fd_check"]["mode"] == "full"
    zero_tol = 2 * np.finfo(np.float64).eps * truth[1]  # n*eps*max|lambda|, H exactly symmetric
    assert doc["zero_tolerance"]["value"] == pytest.approx(zero_tol, rel=1e-12)
    assert doc["zero_tolerance"]["rule"] == (
        f"n*eps*max|lambda| = {zero_tol:.3g} (eigensolver round-off)"
        " + ||H - H^T||_F/2 = 0 (asymmetry of the computed Hessian)"
    )
    for key in ("function", "n", "blocks", "method", "smallest",
                "largest", "residuals", "sampling", "expect", "expectation_met", "notes"):
        assert key in doc
    envelope = run.json()  # schema, ok and exit_code moved from the result to the envelope
    assert (envelope["schema"], envelope["command"], envelope["ok"], envelope["exit_code"]) == (2, "hessian", True, 0)


def test_rosenbrock_text_report():
    run = gradcli("hessian", ROSENBROCK)
    assert run.exit_code == 0, run
    lines = [line.strip() for line in run.stdout.splitlines()]
    assert "eigenvalues (2): 0.399360767  1001.60064" in lines
    assert "verdict: positive definite" in lines
    # The zero tolerance n*eps*max|lambda| with n = 2, max|lambda| = 501 + sqrt(250601);
    # the Hessian [[802, -400], [-400, 200]] is exactly symmetric.
    zero_tol = f"{2 * np.finfo(np.float64).eps * (501 + np.sqrt(250601)):.3g}"
    assert (
        f"|lambda| <= {zero_tol} counts as zero: n*eps*max|lambda| = {zero_tol} (eigensolver round-off)"
        " + ||H - H^T||_F/2 = 0 (asymmetry of the computed Hessian)"
    ) in lines
    assert "finite-difference check of the Hessian  [full, float64, rtol=1e-06, atol=1e-09]" in lines


def test_rosenbrock_elsewhere_is_not_convex():
    run = gradcli("hessian", ROSENBROCK, "--set", "x=0", "--set", "y=1", "--json")
    doc = run.result
    # At (0, 1): H = [[2 - 400, 0], [0, 200]].
    np.testing.assert_allclose(doc["eigenvalues"], [-398.0, 200.0], rtol=1e-12)
    assert doc["verdict"] == "indefinite"


def test_tanh_net_closed_form_hessian_at_its_point():
    run = gradcli("hessian", TANH, "--json")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(run.result["hessian"], tanh_hessian(1.5, -0.7), rtol=1e-10)


def test_tanh_region_finds_a_negative_eigenvalue_and_a_witness():
    point = ["--set", "w1=1", "--set", "w2=0.5"]
    assert np.all(np.linalg.eigvalsh(tanh_hessian(1.0, 0.5)) > 0)  # convex at the point itself
    alone = gradcli("hessian", TANH, *point, "--expect", "convex", "--no-fd-check")
    assert alone.exit_code == 0, alone
    assert "verdict: positive definite" in alone.stdout
    run = gradcli("hessian", TANH, *point, "--samples", "40", "--radius", "0.6",
                  "--expect", "convex", "--no-fd-check")
    assert run.exit_code == 1, run
    assert re.search(
        r"^  expect convex: FAILED: expected convex, but the Hessian has a negative eigenvalue at "
        r"[1-9]\d* of 41 points \(the given one and 40 samples\)$",
        run.stdout, re.MULTILINE,
    ), run
    witness = next(line.strip() for line in run.stdout.splitlines() if line.strip().startswith("--set w1="))
    args = witness.replace("--set ", "--set=").split()
    values = dict(a.split("=", 2)[1:] for a in args)
    w1, w2 = float(values["w1"]), float(values["w2"])
    truth = np.linalg.eigvalsh(tanh_hessian(w1, w2))
    assert truth[0] < 0  # the witness really is a point of negative curvature
    again = gradcli("hessian", TANH, *args, "--json", "--no-fd-check").result
    assert again["smallest"] == pytest.approx(truth[0], rel=1e-10)
    assert again["verdict"] == "indefinite"


def test_sampling_json_counts():
    doc = gradcli("hessian", TANH, "--set", "w1=1", "--set", "w2=0.5", "--samples", "40",
                  "--radius", "0.6", "--no-fd-check", "--json").result
    s = doc["sampling"]
    assert s["samples"] == 40 and s["radius"] == 0.6 and s["witness_for"] == "convex"
    smallest = np.array(s["smallest"])
    assert s["n_negative"] == int(np.sum(smallest < -doc["zero_tolerance"]["value"]))
    assert s["n_negative"] >= 1
    assert s["witness"]["smallest"] == pytest.approx(smallest.min())
    assert s["witness"]["set"][0].startswith("--set w1=")


# -- Lanczos and Hutchinson ----------------------------------------------------------


def test_lanczos_finds_extremes_of_a_known_spectrum():
    from gradcli.analyses.hessian import lanczos_extremes

    rng = np.random.default_rng(3)
    n = 400
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eigenvalues = np.sort(np.concatenate([[-5.0, -4.0, -4.0], rng.uniform(-3, 3, n - 6), [4.5, 5.0, 7.0]]))
    H = (Q * eigenvalues) @ Q.T
    result = lanczos_extremes(lambda v: H @ v, n, 3, rng=rng, tol=1e-10)
    assert result.converged
    np.testing.assert_allclose(result.values[:3], eigenvalues[:3], rtol=1e-9)  # -4 twice: multiplicity
    np.testing.assert_allclose(result.values[-3:], eigenvalues[-3:], rtol=1e-9)
    assert np.all(result.residuals <= 1e-10 * 7.0 * 1.01)
    lowest = result.lowest_vector / np.linalg.norm(result.lowest_vector)
    assert abs(lowest @ Q[:, 0]) == pytest.approx(1.0, abs=1e-8)


def test_lanczos_method_matches_dense_and_hutchinson_is_within_its_error():
    from gradcli.model.loading import load_model

    A = load_model(LEAST_SQUARES).point["A"]
    truth = np.linalg.eigvalsh(2 * A.T @ A)
    doc = gradcli("hessian", LEAST_SQUARES, "--method", "lanczos", "--top", "1",
                  "--trace-probes", "200", "--json").result
    assert doc["method"] == "lanczos" and doc["hessian"] is None
    np.testing.assert_allclose([doc["smallest"], doc["largest"]], truth[[0, -1]], rtol=1e-8)
    assert doc["verdict"] == "positive definite"
    assert doc["fd_check"]["mode"] == "fast" and doc["fd_check"]["ok"]
    trace = doc["trace"]
    assert trace["method"] == "hutchinson" and trace["probes"] == 200
    assert abs(trace["estimate"] - np.trace(2 * A.T @ A)) <= 5 * trace["stderr"]


def test_classify_rules():
    from gradcli.verdicts.curvature import classify

    assert classify(1.0, 2.0, 1e-9) == "positive definite"
    assert classify(1e-12, 2.0, 1e-9) == "positive semidefinite"
    assert classify(-1.0, 2.0, 1e-9) == "indefinite"
    assert classify(-2.0, -1e-12, 1e-9) == "negative semidefinite"
    assert classify(-2.0, -1.0, 1e-9) == "negative definite"
    assert classify(-1e-12, 1e-12, 1e-9) == "zero"


# -- blocks, outputs, files -------------------------------------------------------------


def test_two_outputs_need_a_cotangent_then_blocks_follow_the_inputs():
    run = gradcli("hessian", sample("two_by_two.py"))
    assert run.exit_code == 2, run
    shown = os.path.relpath(sample("two_by_two.py"))  # messages show paths below the cwd relative
    assert error_line(run) == (
        f"Error: {shown} has several outputs (u, v); "
        "pick one with --cotangent OUTPUT=VALUE (e.g. OUTPUT=1 for its sum)"
    )
    doc = gradcli("hessian", sample("two_by_two.py"), "--cotangent", "v=1", "--json").result
    a = np.array([0.5, -1.0, 2.0])
    truth = np.diag(np.concatenate([-np.sin(a), [2.0, 2.0, 2.0]]))  # f = sum(sin a + b^2)
    np.testing.assert_allclose(doc["hessian"], truth, atol=1e-14)
    assert [b["name"] for b in doc["blocks"]] == ["a", "b"]
    assert doc["labels"][3] == "b[0]"
    assert doc["function"] == "f = <c_v, v> (c from --cotangent)"


def test_save_npz_and_paste_the_witness_back(tmp_path):
    out = tmp_path / "h.npz"
    run = gradcli("hessian", TANH, "--set", "w1=1", "--set", "w2=0.5", "--samples", "20",
                  "--radius", "0.6", "--no-fd-check", "--save", out)
    assert run.exit_code == 0, run
    saved = np.load(out)
    np.testing.assert_allclose(saved["hessian"], tanh_hessian(1.0, 0.5), rtol=1e-10)
    assert {"eigenvalues", "eigenvectors", "lowest_vector", "point/w1", "witness/w1"} <= set(saved.files)
    doc = gradcli("hessian", TANH, "--set", f"w1=@{out}:witness/w1", "--set", f"w2=@{out}:witness/w2",
                  "--json", "--no-fd-check").result
    truth = np.linalg.eigvalsh(tanh_hessian(float(saved["witness/w1"]), float(saved["witness/w2"])))
    assert doc["smallest"] == pytest.approx(truth[0], rel=1e-10)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "h.png"
    run = gradcli("hessian", ROSENBROCK, "--plot", out, "--no-fd-check")
    assert run.exit_code == 0, run
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- finite-difference checks of second derivatives ---------------------------------------


def test_stop_gradient_custom_gradient_passes_order_1_and_fails_order_2():
    first = gradcli("check", STOP_GRADIENT)
    assert first.exit_code == 0, first
    second = gradcli("check", STOP_GRADIENT, "--order", "2", "--json")
    assert second.exit_code == 1, second
    pairs = second.result["models"][0]["pairs"]
    assert [(p["output"], p["verdict"]) for p in pairs] == [
        ("output", "pass"), ("d(output)/dx", "mismatch")
    ]
    x = np.array([-1.5, 0.25, 2.0])
    sig, sp = 1 / (1 + np.exp(-x)), np.log1p(np.exp(x))
    worst = pairs[1]["worst"]
    i = worst["input_index"][0]
    # numeric side: the true second derivative 2 sig^2 + 2 sp sig (1 - sig)
    assert worst["numeric"] == pytest.approx(2 * sig[i] ** 2 + 2 * sp[i] * sig[i] * (1 - sig[i]), rel=1e-8)
    assert worst["analytic"] == pytest.approx(2 * sig[i] ** 2, rel=1e-10)  # what TF sees


def test_order_2_fast_mode_passes_on_a_correct_model():
    run = gradcli("check", TANH, "--order", "2", "--mode", "fast", "--json")
    assert run.exit_code == 0, run
    second = [p for p in run.result["models"][0]["pairs"] if p["output"].startswith("d(")]
    assert len(second) == 4 and all(p["mode"] == "fast" and p["verdict"] == "pass" for p in second)


def test_hessian_command_reports_a_wrong_second_derivative():
    run = gradcli("hessian", STOP_GRADIENT)
    assert run.exit_code == 1, run
    assert "FAIL x -> df/dx: mismatch" in run.stdout


# -- bad input --------------------------------------------------------------------------


HELP_HINT = " (see 'gradcli hessian --help')"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--radius", "-1", "--samples", "3"], "Invalid value for '--radius': must be > 0, got -1.0" + HELP_HINT),
        (["--expect", "wavy"], "Invalid value for '--expect': 'wavy' is not one of 'convex', 'concave'." + HELP_HINT),
        (["--samples", "3"], "--samples needs --radius (the half-width of the box to sample)" + HELP_HINT),
        (["--radius", "0.5"], "--radius needs --samples N (or --plot, where it sets the slice width)" + HELP_HINT),
        (["--top", "0"], "Invalid value for '--top': 0 is not in the range x>=1." + HELP_HINT),
        (["--tol", "2"], "Invalid value for '--tol': must be between 0 and 1, got 2.0" + HELP_HINT),
        (["--zero-tol", "-1"], "Invalid value for '--zero-tol': must be >= 0, got -1.0" + HELP_HINT),
        # tanh_net.py has one output `output` and inputs w1, w2, x, y.
        (["--cotangent", "nope=1"], "--cotangent: unknown output 'nope' (known: output)"),
        (["--wrt", "zz"], "--wrt: unknown input 'zz' (known: w1, w2, x, y)"),
    ],
)
def test_bad_options_exit_2_with_one_line(args, message):
    run = gradcli("hessian", TANH, *args)
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: " + message


def test_bad_order_exits_2():
    run = gradcli("check", TANH, "--order", "3")
    assert run.exit_code == 2, run
    assert error_line(run) == (
        "Error: Invalid value for '--order': 3 is not in the range 1<=x<=2. (see 'gradcli check --help')"
    )


def test_missing_model_file_exits_2_and_broken_model_exits_3(tmp_path):
    run = gradcli("hessian", tmp_path / "none.py")
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: no such model file: {tmp_path / 'none.py'}"
    broken = tmp_path / "broken.py"
    broken.write_text("def model(x):\n    raise ValueError('boom')\n\ninputs = {'x': 1.0}\n")
    run = gradcli("hessian", broken)
    assert run.exit_code == 3, run
    assert error_line(run) == f"Error: {broken}:2: forward pass raised ValueError: boom"


def test_plot_without_matplotlib_is_a_usage_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    run = gradcli("hessian", TANH, "--plot", "x.png")
    assert run.exit_code == 2, run
    assert "pip install 'gradcli[plot]'" in error_line(run)


def test_usage_errors_do_not_import_tensorflow():
    argv = ("hessian", "sample_models/tanh_net.py", "--radius", "-1", "--samples", "2")
    assert fresh_process(*argv) == (2, [])


def test_junit_xml_for_expectations(tmp_path):
    import xml.etree.ElementTree as ET

    report = tmp_path / "h.xml"
    run = gradcli("hessian", sample("tanh_net.py"), "--samples", "20", "--radius", "0.6",
                  "--expect", "convex", "--junit-xml", report)
    assert run.exit_code == 1, run
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")}
    assert set(cases) == {"expect convex", "finite-difference check"}
    failure = cases["expect convex"].find("failure")
    # tanh_net.py's own point (w1, w2) = (1.5, -0.7) is already indefinite (closed form),
    # so at least that one of the 21 points has a negative eigenvalue.
    assert np.linalg.eigvalsh(tanh_hessian(1.5, -0.7))[0] < 0
    assert failure.get("type") == "expectation"
    message = re.fullmatch(
        r"expected convex, but the Hessian has a negative eigenvalue at (\d+) of 21 points "
        r"\(the given one and 20 samples\)",
        failure.get("message"),
    )
    assert message and 1 <= int(message.group(1)) <= 21, failure.get("message")
    assert cases["finite-difference check"].find("failure") is None

    run = gradcli("hessian", sample("least_squares.py"), "--expect", "convex", "--junit-xml", report)
    assert run.exit_code == 0, run
    root = ET.parse(report).getroot()
    assert root.get("failures") == "0" and root.get("tests") == "2"

    run = gradcli("hessian", fixture("syntax_error.py"), "--junit-xml", report)
    assert run.exit_code == 3, run
    (case,) = ET.parse(report).getroot().iter("testcase")
    assert case.find("error").get("message").endswith("syntax error: expected ':'")
