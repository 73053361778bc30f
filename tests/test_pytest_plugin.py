"""``pytest --gradcli`` (gradcli/pytest_plugin.py), run through pytester."""

from __future__ import annotations

import importlib
import os
import shutil
import tomllib

import numpy as np
import pytest

from conftest import FIXTURES, ROOT, SAMPLES

pytest_plugins = ["pytester"]



def _load_plugin() -> tuple[str, ...]:
    """``-p gradcli.pytest_plugin`` unless the installed metadata has the entry
    point (``pip install .``): pytest then loads it by itself, and ``-p`` would
    register the same module a second time."""
    from importlib.metadata import entry_points

    installed = any(ep.name == "gradcli" for ep in entry_points(group="pytest11"))
    return () if installed else ("-p", "gradcli.pytest_plugin")


# In-process runs load the plugin this session has imported already: no rewriting.
PLUGIN = (*_load_plugin(), "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")


@pytest.fixture(scope="module")
def tensorflow_first():
    """pytester drops the modules a test imported when the test ends, and
    TensorFlow aborts when imported twice in one process: import it before
    pytester takes its snapshot (higher-scoped fixtures are set up first)."""
    import gradcli.analyses.check  # noqa: F401


@pytest.fixture
def project(tensorflow_first, pytester, monkeypatch):
    """A project with a models/ folder (one correct model, one with a wrong
    custom gradient) named by [tool.gradcli] paths, and tests/ as testpaths."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    models = pytester.mkdir("models")
    for name in ("square.py", "buggy_custom_gradient.py"):
        shutil.copy(SAMPLES / name, models / name)
    pytester.makepyprojecttoml(
        '[tool.gradcli]\npaths = ["models"]\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    )
    pytester.mkdir("tests")
    pytester.makepyfile(**{"tests/test_plain": (
        "import sys\n\n"
        "def test_plain():\n"
        "    assert 'tensorflow' not in sys.modules\n"
    )})
    return pytester


def test_entry_point_is_declared():
    with open(ROOT / "pyproject.toml", "rb") as f:
        entry = tomllib.load(f)["project"]["entry-points"]["pytest11"]["gradcli"]
    plugin = importlib.import_module(entry)
    assert callable(plugin.pytest_addoption) and callable(plugin.pytest_collect_file)


def test_without_the_flag_nothing_changes_and_tensorflow_stays_out(project):
    # A fresh interpreter: this session has imported TensorFlow already.
    result = project.runpytest_subprocess(*PLUGIN, "-v")
    result.assert_outcomes(passed=1)
    assert "models/" not in result.stdout.str()
    help_text = project.runpytest_subprocess(*PLUGIN, "--help").stdout.str()
    assert "--gradcli-glob=PATTERN" in help_text


def _expected_worst():
    # f = sum(softplus(x)^2) at x = [-1.5, 0.25, 2]: df/dx = 2 softplus(x) sigmoid(x),
    # and the model's gradient multiplies sigmoid by (1 + 1e-3 x); x[2] = 2 is worst.
    x = 2.0
    true = 2 * np.log1p(np.exp(x)) / (1 + np.exp(-x))
    return f"output / x[2]: analytic {true * (1 + 1e-3 * x):.10g}, numeric {true:.10g}"


def test_one_item_per_model_with_the_verdict_table(project):
    collected = project.runpytest(*PLUGIN, "--gradcli", "--collect-only", "-q")
    assert collected.stdout.lines[:3] == [
        "tests/test_plain.py::test_plain",
        "models/buggy_custom_gradient.py::gradcli",
        "models/square.py::gradcli",
    ]
    result = project.runpytest(*PLUGIN, "--gradcli", "-m", "gradcli", "-rf")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    text = result.stdout.str()
    assert "FAILED models/buggy_custom_gradient.py::gradcli - gradcli check: fail (mismatch)" in text
    result.stdout.fnmatch_lines([
        "*gradcli check models/buggy_custom_gradient.py*",
        "gradcli check: fail (mismatch)",
        "models/buggy_custom_gradient.py  [[]full, float64, rtol=1e-06, atol=1e-09]",
        "*input*output*verdict*",
        "*x*output*mismatch*",
    ])
    assert _expected_worst() in text
    assert "defined at models/buggy_custom_gradient.py:11" in text


def test_glob_and_options_from_pyproject(project):
    # [tool.gradcli.check] applies to the items as to `gradcli check`: a loose
    # rtol of 0.01 lets the 0.2% error of the buggy model pass.
    project.makepyprojecttoml('[tool.gradcli.check]\nrtol = 0.01\n')
    result = project.runpytest(*PLUGIN, "--gradcli", "--gradcli-glob", "models/b*.py", "-m", "gradcli")
    result.assert_outcomes(passed=1, deselected=1)


@pytest.mark.parametrize("pyproject, args, message", [
    ("[tool.gradcli]\nrtol = 1\n", ["--gradcli"],
     "ERROR: gradcli: --gradcli needs --gradcli-glob PATTERN or `paths` in [[]tool.gradcli[]]"),
    ("[tool.gradcli]\nrtol = -1\n", ["--gradcli", "--gradcli-glob", "*.py"],
     "ERROR: gradcli: pyproject.toml [[]tool.gradcli[]] rtol: must be >= 0, got -1.0"),
    ("[tool.gradcli]\nx = 1\n", ["--gradcli", "--gradcli-glob", "*.py"],
     "ERROR: gradcli: pyproject.toml [[]tool.gradcli[]] x: not an option of gradcli check*"),
    ("[tool.gradcli]\nrtol = 1\n", ["--gradcli", "--gradcli-glob", "nothing/*.py"],
     "ERROR: gradcli: --gradcli-glob nothing/*.py matches no *.py file below *"),
])
def test_configuration_errors_are_one_line(pytester, pyproject, args, message):
    pytester.makepyprojecttoml(pyproject)
    result = pytester.runpytest(*PLUGIN, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_xdist_spreads_the_models(project):
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess(*PLUGIN, "-p", "xdist", "--gradcli", "-n", "2", "-rf")
    result.assert_outcomes(passed=2, failed=1)
    assert "FAILED models/buggy_custom_gradient.py::gradcli - gradcli check: fail (mismatch)" in result.stdout.str()
    assert _expected_worst() in result.stdout.str()


def test_keras_layers_are_checked_by_their_input_gradient(tensorflow_first, pytester, monkeypatch):
    """A custom layer whose input gradient is 1% off and a weightless activation
    layer with a wrong gradient fail as items; their right twins pass."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    models = pytester.mkdir("models")
    for name in ("keras_input_gradient.py", "keras_input_gradient_wrong.py", "keras_activation.py",
                 "keras_activation_wrong.py"):
        shutil.copy(FIXTURES / name, models / name)
    pytester.makepyprojecttoml('[tool.gradcli]\npaths = ["models"]\n')
    result = pytester.runpytest(*PLUGIN, "--gradcli", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    failed = {line.split("::")[0] for line in result.stdout.lines if line.startswith("FAILED models/")}
    assert failed == {"FAILED models/keras_input_gradient_wrong.py", "FAILED models/keras_activation_wrong.py"}
    # Counted in the failure reports only: on CI pytest repeats each failure's
    # whole message in the short summary (running_on_ci), elsewhere its first line.
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("FAIL x -> output: mismatch") == 2
