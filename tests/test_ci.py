"""CI and batch use: JUnit XML, configuration precedence, batch runs, the Python API.

Truth for the verdicts below: the deliberately buggy sample's gradient is off
by a relative 1e-3 * x, so at x = 2 the relative error is 0.002: it fails at
rtol 1e-6 and passes at rtol 1e-2. Every other sample model is correct.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

import gradcli
from gradcli.render.progress import progress_callback, wanted
from gradcli.testing import assert_gradients_ok
from tests.conftest import ROOT, SAMPLES, fixture, gradcli as run_cli, sample

#: One worker runs this module: its module-scoped fixture is costly (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

BUGGY = "buggy_custom_gradient.py"
#: Samples allowed to fail a check (docs/samples.md).
MAY_FAIL = {BUGGY, "fake_quant.py"}


# --- JUnit XML over every sample model ----------------------------------------------


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    report = tmp_path_factory.mktemp("junit") / "r.xml"
    result = run_cli("check", SAMPLES, "--junit-xml", report)
    return result, ET.parse(report).getroot()


def test_junit_one_testcase_per_model_and_input(sample_run):
    result, root = sample_run
    assert result.exit_code == 1, result
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    names = {(os.path.basename(c.get("classname")), c.get("name")) for c in cases}
    assert ("square.py", "x") in names
    assert {("linear_regression.py", "W"), ("linear_regression.py", "b")} <= names
    # two outputs: one testcase per (input, output), named input/output
    assert {n for f, n in names if f == "two_by_two.py"} == {"a/u", "a/v", "b/u", "b/v"}
    models = {os.path.basename(c.get("classname")) for c in cases}
    assert models == {p.name for p in SAMPLES.glob("*.py") if not p.name.startswith("_")}
    for node in (root, suite):
        assert int(node.get("tests")) == len(cases)
        assert int(node.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert node.get("errors") == "0" and node.get("skipped") == "0"
    assert float(suite.get("time")) == pytest.approx(sum(float(c.get("time")) for c in cases), abs=0.01)


def test_junit_failure_carries_the_report(sample_run):
    _, root = sample_run
    failed = {
        os.path.basename(c.get("classname")): c.find("failure")
        for c in root.iter("testcase") if c.find("failure") is not None
    }
    assert BUGGY in failed and set(failed) <= MAY_FAIL
    failure = failed[BUGGY]
    assert failure.get("type") == "mismatch"
    assert failure.get("message").startswith("mismatch: the analytic derivative disagrees")
    assert "output / x[2]" in failure.text and "rel err 0.002" in failure.text
    # ... and the diagnosis a CI page needs without the log: the culprit and its lines
    # (the sample's custom gradient is applied at line 21, defined at line 11).
    culprit = next(line for line in failure.text.splitlines() if "culprit:" in line)
    assert "tf.custom_gradient softplus" in culprit
    assert culprit.endswith(f"at sample_models/{BUGGY}:21, defined at sample_models/{BUGGY}:11"), culprit


def test_batch_summary_table(sample_run):
    result, _ = sample_run
    summary = result.stdout[result.stdout.index("summary"):]
    for line in summary.splitlines():
        if BUGGY in line:
            assert "fail (mismatch)" in line
        if "two_by_two.py" in line:  # 2 inputs, 4 (input, output) pairs
            assert "│              2 │     4 │ pass" in line
    samples = [p for p in SAMPLES.glob("*.py") if not p.name.startswith("_")]
    failing = sum(p.name in MAY_FAIL for p in samples)
    assert f"{len(samples) - failing} of {len(samples)} models passed" in summary


def test_junit_error_and_fail_fast_skipped(tmp_path):
    report = tmp_path / "r.xml"
    result = run_cli("check", fixture("ci_import_error.py"), sample("square.py"), "--junit-xml", report)
    assert result.exit_code == 3, result
    cases = ET.parse(report).getroot().findall("testsuite/testcase")
    error = cases[0].find("error")
    assert cases[0].get("name") == "load" and "RuntimeError" in error.get("message")
    assert cases[1].find("error") is None and cases[1].find("failure") is None
    assert "ci_import_error.py:3: RuntimeError while importing" in result.stderr

    result = run_cli("check", sample(BUGGY), sample("square.py"), "--fail-fast", "--junit-xml", report)
    assert result.exit_code == 1, result
    root = ET.parse(report).getroot()
    assert root.get("skipped") == "1" and root.get("failures") == "1"
    skipped = root.find("testsuite/testcase/skipped/..")
    assert skipped.get("classname").endswith("square.py")
    assert "not run" in result.stdout and "1 not run (--fail-fast)" in result.stdout


def test_an_interrupted_batch_says_so_and_counts_what_ran(monkeypatch):
    """Ctrl-C while the third of three models runs (without --fail-fast): two
    models finished (one passed), one did not. The text report says the run
    was interrupted, not that --fail-fast skipped a model; exit 130."""
    from gradcli.workers import batch
    from gradcli.results import CheckResult, ModelResult, Tolerance

    def interrupted(specs, *args, **kwargs):
        tolerance = Tolerance(rtol=1e-6, atol=1e-9, rule="float64 defaults")
        finished = [ModelResult(name=specs[0], path=specs[0], dtype="float64", mode="full", tolerance=tolerance),
                    ModelResult(name=specs[1], path=specs[1], error="boom", error_code=3)]
        raise batch.Interrupted(CheckResult(models=finished, skipped=[specs[2]]))

    monkeypatch.setattr(batch, "check_batch", interrupted)
    names = [sample("square.py"), sample("two_by_two.py"), sample(BUGGY)]
    result = run_cli("check", *names)
    assert result.exit_code == 130, result
    lines = result.stdout.splitlines()
    assert lines[-1] == "interrupted after 2 of 3 models: 1 of 2 passed, 1 not run", result
    assert "(--fail-fast)" not in result.stdout and "not finished" in result.stdout
    assert result.stderr.splitlines() == ["Error: interrupted"]


def test_junit_folder_must_exist(tmp_path):
    result = run_cli("check", sample("square.py"), "--junit-xml", tmp_path / "no" / "r.xml")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: Invalid value for '--junit-xml': folder of")


def test_quiet_reports_only_failures():
    result = run_cli("check", sample("square.py"), sample(BUGGY), "--quiet")
    assert result.exit_code == 1
    assert "output[1] / x[1]" not in result.stdout  # square's table is left out
    assert "FAIL x -> output: mismatch" in result.stdout
    assert "1 of 2 models passed" in result.stdout
    assert result.stderr == ""  # no progress bar: stderr is not a terminal


# --- configuration ------------------------------------------------------------------

BUGGY_SOURCE = (SAMPLES / BUGGY).read_text()


def project(tmp_path, monkeypatch, pyproject: str, check: str | None = None):
    """A project folder with a pyproject.toml and models/buggy.py (its `check` dict given)."""
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(pyproject))
    (tmp_path / "models").mkdir()
    source = BUGGY_SOURCE + (f"\ncheck = {check}\n" if check else "")
    (tmp_path / "models" / "buggy.py").write_text(source)
    sub = tmp_path / "models"
    monkeypatch.chdir(sub)  # the nearest pyproject.toml is found from a subfolder
    return sub


def only_model(result):
    document = result.json()
    assert len(document["result"]["models"]) == 1, result
    return document["result"]["models"][0]


def test_pyproject_defaults_and_paths(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch, """
        [tool.gradcli]
        paths = ["models"]
        rtol = 1e-2
        [tool.gradcli.check]
        mode = "fast"
    """)
    result = run_cli("check", "--json")  # no MODEL: the configured paths
    model = only_model(result)
    assert result.exit_code == 0, result
    assert model["name"].endswith("buggy.py")
    assert model["tolerance"]["rtol"] == 1e-2 and model["mode"] == "fast"


def test_model_file_beats_pyproject(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch, """
        [tool.gradcli]
        paths = ["models"]
        rtol = 1e-2
    """, check='{"rtol": 1e-6, "mode": "full"}')
    result = run_cli("check", "--json")
    model = only_model(result)
    assert result.exit_code == 1, result
    assert model["tolerance"]["rtol"] == 1e-6 and model["pairs"][0]["verdict"] == "mismatch"
    assert "options from the model file's `check`: rtol=1e-06, mode='full'" in model["notes"]


def test_command_line_beats_model_file(tmp_path, monkeypatch):
    folder = project(tmp_path, monkeypatch, """
        [tool.gradcli]
        rtol = 1e-6
    """, check='{"rtol": 1e-6}')
    result = run_cli("check", folder / "buggy.py", "--rtol", "1e-2", "--json")
    model = only_model(result)
    assert result.exit_code == 0, result
    assert model["tolerance"]["rtol"] == 1e-2
    assert not any("model file" in n for n in model["notes"])


def test_model_file_setting_applied_while_loading(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import numpy as np

        def model(x):
            return x * x

        inputs = {"x": np.array([1.0, 2.0], np.float32)}
        check = {"native-dtype": True}
    """))
    monkeypatch.chdir(tmp_path)
    model = only_model(run_cli("check", "m.py", "--json"))
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == 1e-3


@pytest.mark.parametrize("pyproject, message", [
    ('[tool.gradcli]\nrtoll = 1', "pyproject.toml [tool.gradcli] rtoll: not an option of gradcli check; did you mean 'rtol'? (known: "),
    ('[tool.gradcli]\nrtol = "small"', "pyproject.toml [tool.gradcli] rtol: 'small' is not a valid float."),
    ('[tool.gradcli]\nmode = "slow"', "pyproject.toml [tool.gradcli] mode: 'slow' is not one of 'auto', 'full', 'fast'."),
    ('[tool.gradcli]\nprobes = 0', "pyproject.toml [tool.gradcli] probes: 0 is not in the range x>=1."),
    ('[tool.gradcli.chek]\nrtol = 1', "pyproject.toml [tool.gradcli] chek: unknown command table (commands: check"),
    ('[tool.gradcli\nrtol = 1', "pyproject.toml: invalid TOML: "),
])
def test_bad_pyproject_is_one_line_exit_2(tmp_path, monkeypatch, pyproject, message):
    (tmp_path / "pyproject.toml").write_text(pyproject)
    monkeypatch.chdir(tmp_path)
    result = run_cli("check", sample("square.py"))
    assert result.exit_code == 2, result
    assert result.stderr.startswith(f"Error: {message}"), result
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_bad_model_check_dict_is_exit_2():
    result = run_cli("check", fixture("ci_bad_check_key.py"))
    assert result.exit_code == 2, result
    assert "ci_bad_check_key.py: `check` key 'rtoll' is not an option (known: " in result.stderr


def test_no_model_and_no_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("check")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no MODEL given and no `paths` in [tool.gradcli]")


# --- the Python API -----------------------------------------------------------------


def test_api_returns_the_result_objects():
    result = gradcli.check(sample("square.py"), mode="full")
    assert result.ok and result.exit_code == 0
    (model,) = result.models
    assert (model.dtype, model.mode, model.error) == ("float64", "full", None)
    assert (model.tolerance.rtol, model.tolerance.atol) == (1e-6, 1e-9)  # float64 defaults
    (pair,) = model.pairs
    assert (pair.input, pair.output, pair.verdict, pair.failed) == ("x", "output", "pass", False)
    # y = x*x at [1, 2]: J = diag(2, 4), 4 elements; the worst element reported is one
    # of them, and central differences of a quadratic are exact up to round-off.
    assert pair.compared == 4
    worst = pair.worst
    (i,), (j,) = worst.output_index, worst.input_index
    assert worst.analytic == [[2.0, 0.0], [0.0, 4.0]][i][j]
    assert worst.numeric == pytest.approx(worst.analytic, abs=1e-8)
    assert pair.max_abs_error <= 1e-8


def test_library_modules_do_not_shadow_the_standard_library():
    import importlib
    import sysconfig

    importlib.import_module("gradcli.analyses.inspection")
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    module = importlib.import_module("inspect")
    assert os.path.dirname(os.path.realpath(module.__file__)) == stdlib, module


def test_api_options_beat_the_model_file(tmp_path):
    path = tmp_path / "buggy.py"
    path.write_text(BUGGY_SOURCE + '\ncheck = {"rtol": 1e-2}\n')
    assert gradcli.check(str(path)).ok  # the file's rtol
    assert not gradcli.check(str(path), rtol=1e-6).ok  # the call's rtol wins


def test_api_unknown_option():
    with pytest.raises(TypeError, match=r"unknown keyword rtoll \(did you mean rtol\?\)"):
        gradcli.check(sample("square.py"), rtoll=1)


def test_assert_gradients_ok_on_a_callable():
    import tensorflow as tf

    result = assert_gradients_ok(lambda x: tf.sin(x) * x, inputs={"x": [0.3, -1.2]})
    assert result.models[0].pairs[0].verdict == "pass"


def test_assert_gradients_ok_message_is_the_report():
    with pytest.raises(AssertionError) as info:  # in this process: the report is what is tested
        assert_gradients_ok(sample(BUGGY), isolate=False)
    message = str(info.value)
    assert "FAIL x -> output: mismatch" in message
    assert "output / x[2]: analytic 3.754277522, numeric 3.746783954" in message
    assert "\x1b[" not in message


def test_sample_models_pass():
    """The correct samples pass, checked the way a project's own test suite would."""
    assert_gradients_ok([sample(n) for n in ("square.py", "two_by_two.py", "tanh_net.py")])


def test_jobs_keeps_order_and_verdicts():
    specs = [sample(BUGGY), sample("sign_loss.py")]
    result = gradcli.check(specs, jobs=2)
    assert [os.path.basename(m.name) for m in result.models] == [BUGGY, "sign_loss.py"]
    assert [m.ok for m in result.models] == [False, True]
    assert result.models[1].pairs[0].verdict == "zero"


# --- progress, colour, start-up -----------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal():
    assert wanted(Terminal(), total=3)
    assert not wanted(io.StringIO(), total=3)
    assert not wanted(Terminal(), enabled=False, total=3)  # --json or --quiet
    assert not wanted(Terminal(), total=1)
    stream = Terminal()
    with progress_callback(total=2, stream=stream) as progress:
        progress(0, 2, None)
        progress(1, 2, "square.py")
    assert "checking" in stream.getvalue()
    with progress_callback(total=2, stream=io.StringIO()) as progress:
        assert progress is None


def test_colour_follows_force_color_and_no_color():
    green = "\x1b[32m"
    assert green in run_cli("check", sample("square.py"), env={"FORCE_COLOR": "1"}).stdout
    assert green not in run_cli("check", sample("square.py")).stdout
    forced_off = run_cli("check", sample("square.py"), env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert green not in forced_off.stdout


def python(*args, code=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, *(["-c", code] if code else args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def test_version():
    done = python("-m", "gradcli", "--version")
    assert done.returncode == 0 and done.stdout == f"gradcli, version {gradcli.__version__}\n"


def test_help_imports_no_heavy_module():
    """What keeps --help fast is that it imports nothing heavy; its time is
    measured in bench/ (farm-bench), not asserted here, where a loaded CI
    machine would turn a timing into a flaky failure."""
    done = python(code=textwrap.dedent("""
        import sys
        from gradcli.cli import cli
        code = cli.main(["--help"], standalone_mode=False)
        heavy = sorted(m for m in ("tensorflow", "keras", "numpy", "rich") if m in sys.modules)
        print(heavy, file=sys.stderr)
    """))
    assert done.stderr.strip() == "[]", done.stderr
    assert "Usage: gradcli" in done.stdout and "check" in done.stdout


def test_the_time_left_starts_from_the_estimate_and_does_not_jump():
    """A 100-chunk pass of 0.57 s chunks on average (57 s, the estimate the
    note gives after the first chunk, of 0.57 s), the others 0.3 s to 0.9 s:
    the bar's time left, read at each update of the first 15 s, stays within
    15% of the true time left and never rises by more than 3 s (rich's own
    column, from the pace of the last few updates, read 4:22, 12:29, 5:17)."""
    from gradcli.render.progress import Stages, progress_bar

    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    bar = progress_bar(io.StringIO(), clock)
    stages = Stages(bar, clock)
    column = bar.columns[5]
    stages("finite differences", 0, 100, "x, every element")
    chunks = [0.57] + ([0.3, 0.9, 0.4, 0.8, 0.5, 0.7, 0.3, 0.9, 0.6, 0.3] * 10)[:99]  # mean 0.57
    shown = []
    for done, seconds in enumerate(chunks, start=1):
        now[0] += seconds
        stages("finite differences", done, 100, "x, every element")
        if bar.tasks and now[0] < 15:
            h, m, s = column.render(bar.tasks[0]).plain.split(":")
            shown.append((round(now[0], 2), 3600 * int(h) + 60 * int(m) + int(s), sum(chunks[done:])))
    assert len(shown) > 10, shown
    for at, left, truth in shown:
        assert abs(left - truth) <= 0.15 * truth, shown
    assert all(b[1] - a[1] <= 3 for a, b in zip(shown, shown[1:])), shown
