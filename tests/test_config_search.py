"""Which configuration file a command reads (gradcli/config.py), and the flags
that choose it: --config, --isolated, --show-config.

The tree of most tests: an outer folder whose pyproject.toml loosens every
tolerance (rtol = atol = 1), above a checkout (a folder holding .git) whose
own pyproject.toml has no [tool.gradcli] table, holding a model whose custom
gradient is wrong by a relative 1e-3 x. Read, the outer table would make the
wrong model pass; the search must end at the checkout.
"""

from __future__ import annotations

import math
import os
import shutil

import pytest

from conftest import SAMPLES, error_line, gradcli

pytest_plugins = ["pytester"]

LOOSE = '[tool.gradcli]\nrtol = 1\natol = 1\njunit-xml = "leak.xml"\n'


def _worst_pair():
    """The wrong model's worst element, in closed form: f = sum(softplus(x)^2),
    df/dx = 2 softplus(x) sigmoid(x); its gradient carries an extra (1 + 1e-3 x),
    and x = 2 (of -1.5, 0.25, 2) has the largest relative error, 2e-3."""
    x = 2.0
    true = 2 * math.log1p(math.exp(x)) / (1 + math.exp(-x))
    return true * (1 + 1e-3 * x), true


@pytest.fixture(scope="module")
def imported_first():
    """pytester drops the modules an in-process run imported when it ends, and
    numpy refuses to be imported twice in one process: import what the plugin
    uses before pytester takes its snapshot (higher-scoped fixtures come first)."""
    import gradcli.workers.batch, gradcli.cli.check, gradcli.render.text, gradcli.results  # noqa: F401, E401


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """outer/pyproject.toml (loose) > outer/checkout/.git, pyproject.toml (no table), models/buggy.py."""
    outer = tmp_path / "outer"
    checkout = outer / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "models").mkdir()
    (outer / "pyproject.toml").write_text(LOOSE)
    (checkout / "pyproject.toml").write_text('[project]\nname = "checkout"\n')
    shutil.copy(SAMPLES / "buggy_custom_gradient.py", checkout / "models" / "buggy.py")
    monkeypatch.chdir(checkout)
    return checkout


def _settings(run) -> dict:
    """``--show-config`` lines as key -> (value, source)."""
    assert run.exit_code == 0 and run.stderr == "", run
    settings = {}
    for line in run.stdout.splitlines():
        if line.startswith("#"):
            continue
        setting, _, source = line.partition("  # ")
        key, _, value = setting.partition(" = ")
        settings[key] = (value.strip(), source)
    return settings


def _header(run) -> str:
    return next(line for line in run.stdout.splitlines() if line.startswith("# configuration: "))


@pytest.mark.parametrize("where", [".", "models"])
def test_a_table_above_the_checkout_is_not_read(tree, where, monkeypatch):
    monkeypatch.chdir(tree / where)
    model = os.path.relpath(tree / "models" / "buggy.py")
    run = gradcli("check", model, "--json", "--mode", "full")
    assert run.exit_code == 1, run
    (result,) = run.result["models"]
    assert result["tolerance"]["rtol"] == 1e-6 and result["tolerance"]["atol"] == 1e-9
    (pair,) = result["pairs"]
    analytic, numeric = _worst_pair()
    assert pair["verdict"] == "mismatch" and pair["worst"]["input_index"] == [2]
    assert pair["worst"]["analytic"] == pytest.approx(analytic, rel=1e-9)
    assert pair["worst"]["numeric"] == pytest.approx(numeric, rel=1e-7)
    assert not (tree.parent / "leak.xml").exists()  # the outer junit-xml is not written either


@pytest.mark.parametrize("git", ["folder", "file"])
def test_the_repository_root_ends_the_search(tree, git):
    # No pyproject.toml in the checkout at all: .git (a folder, or the file of a
    # worktree or submodule) is where the search stops.
    (tree / "pyproject.toml").unlink()
    if git == "file":
        shutil.rmtree(tree / ".git")
        (tree / ".git").write_text("gitdir: /somewhere/.git/worktrees/checkout\n")
    run = gradcli("check", "--show-config")
    assert _header(run) == f"# configuration: none: no pyproject.toml (searched from {tree} up to {tree})"
    assert _settings(run)["rtol"] == ("(not set)", "default")


def test_a_pyproject_without_the_table_ends_the_search(tree, monkeypatch):
    monkeypatch.chdir(tree / "models")
    run = gradcli("check", "--show-config")
    assert _header(run) == (
        f"# configuration: none: {tree / 'pyproject.toml'} has no [tool.gradcli] table "
        f"(searched from {tree / 'models'} up to {tree})"
    )
    settings = _settings(run)
    assert settings["rtol"] == settings["atol"] == ("(not set)", "default")
    assert settings["junit-xml"] == ("(not set)", "default")


def test_without_a_boundary_the_outer_table_applies(tree):
    # The same tree with neither .git nor the checkout's pyproject.toml: the
    # outer file is then this folder's nearest, and is read (so the tests above
    # do test the boundary, not a table that would never apply).
    shutil.rmtree(tree / ".git")
    (tree / "pyproject.toml").unlink()
    settings = _settings(gradcli("check", "--show-config"))
    outer = tree.parent / "pyproject.toml"
    assert settings["rtol"] == ("1.0", f"{outer} [tool.gradcli] rtol")
    assert settings["atol"] == ("1.0", f"{outer} [tool.gradcli] atol")


def test_pytest_plugin_does_not_read_the_outer_table(imported_first, tree, pytester, monkeypatch):
    # Also with pytest's rootdir at the outer folder: the search starts where
    # pytest was started and ends at the checkout.
    (tree.parent / "pyproject.toml").write_text(LOOSE + "[tool.pytest.ini_options]\n")
    monkeypatch.chdir(tree)
    result = pytester.runpytest(
        "--gradcli", "--rootdir", str(tree.parent), "--gradcli-glob", "checkout/models/*.py",
        "-p", "no:cacheprovider", "-rf",
    )
    result.stdout.fnmatch_lines([f"rootdir: {tree.parent}"])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED *models/buggy.py::gradcli - gradcli check: fail (mismatch)"])
    analytic, numeric = _worst_pair()
    assert f"analytic {analytic:.10g}, numeric {numeric:.10g}" in result.stdout.str()


def test_pytest_plugin_never_reads_above_its_rootdir(imported_first, tmp_path, pytester, monkeypatch):
    # No .git: pytest's rootdir (the folder of its configuration) bounds the
    # search. The outer table is invalid, so reading it would stop the run with
    # a usage error; collecting reads the configuration and runs no model.
    (tmp_path / "pyproject.toml").write_text('[tool.gradcli]\nmode = "nonsense"\n')
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    shutil.copy(SAMPLES / "square.py", project / "models" / "square.py")
    monkeypatch.chdir(project)
    args = ("--gradcli", "--gradcli-glob", "models/*.py", "--collect-only", "-q", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert result.stdout.lines[0] == "models/square.py::gradcli"
    # The same tree with the rootdir one folder up does read it (the test above tests the boundary).
    result = pytester.runpytest("--rootdir", str(tmp_path), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gradcli: * [[]tool.gradcli[]] mode: 'nonsense' is not one of *"])


# --- --config, --isolated -------------------------------------------------------


def test_config_names_a_gradcli_toml_file(tree):
    (tree / "ci" / "out").mkdir(parents=True)
    (tree / "ci" / "gradcli.toml").write_text('rtol = 0.5\n[check]\nmode = "fast"\njunit-xml = "out/report.xml"\n')
    run = gradcli("check", "--config", "ci/gradcli.toml", "--atol", "0.25", "--show-config")
    settings = _settings(run)
    assert _header(run) == "# configuration: ci/gradcli.toml (--config)"
    assert settings["rtol"] == ("0.5", "ci/gradcli.toml rtol")
    assert settings["mode"] == ('"fast"', "ci/gradcli.toml [check] mode")
    assert settings["atol"] == ("0.25", "command line")
    assert settings["probes"] == ("3", "default")
    # relative to the file's folder, not to the working folder
    assert settings["junit-xml"] == (f'"{tree / "ci" / "out" / "report.xml"}"', "ci/gradcli.toml [check] junit-xml")


def test_config_applies_to_the_check(tree):
    (tree / "loose.toml").write_text("rtol = 1\natol = 1\n")
    run = gradcli("check", "models/buggy.py", "--config", "loose.toml", "--mode", "full", "--json")
    assert run.exit_code == 0, run
    assert run.result["models"][0]["tolerance"]["rtol"] == 1.0


def test_config_names_a_pyproject(tree):
    (tree / "other").mkdir()
    (tree / "other" / "pyproject.toml").write_text("[tool.gradcli.hessian]\nexpect = \"convex\"\n")
    settings = _settings(gradcli("hessian", "--config", "other/pyproject.toml", "--show-config"))
    assert settings["expect"] == ('"convex"', "other/pyproject.toml [tool.gradcli.hessian] expect")


@pytest.mark.parametrize("args, message", [
    (["--config", "missing.toml"], "Error: Invalid value for '--config': File 'missing.toml' does not exist."),
    (["--config", "models"], "Error: Invalid value for '--config': File 'models' is a directory."),
    (["--config", "pyproject.toml"], "Error: pyproject.toml: no [tool.gradcli] table"),
    (["--config", "bad.toml"], "Error: bad.toml: invalid TOML: "),
    (["--config", "typo.toml"], "Error: typo.toml rtoll: not an option of gradcli check"),
    (["--config", "typo.toml", "--isolated"], "Error: --config and --isolated: choose one"),
])
def test_bad_config_is_one_line_exit_2(tree, args, message):
    (tree / "bad.toml").write_text("rtol = \n")
    (tree / "typo.toml").write_text("rtoll = 1\n")
    run = gradcli("check", "models/buggy.py", *args)
    assert run.exit_code == 2, run
    assert error_line(run).startswith(message), run


def test_isolated_reads_no_file(tree):
    (tree / "pyproject.toml").write_text('[tool.gradcli]\nrtol = 1\natol = 1\nmode = "nonsense"\n')
    run = gradcli("check", "--isolated", "--show-config")
    assert _header(run) == "# configuration: none (--isolated)"
    assert _settings(run)["mode"] == ('"auto"', "default")  # the bad value is not even read
    checked = gradcli("check", "models/buggy.py", "--isolated", "--mode", "full", "--json")
    assert checked.exit_code == 1, checked
    assert checked.result["models"][0]["tolerance"]["rtol"] == 1e-6


def test_show_config_names_each_source(tree):
    (tree / "pyproject.toml").write_text(
        '[tool.gradcli]\nrtol = 1e-4\npaths = ["models"]\n[tool.gradcli.check]\nfail-on = ["zero"]\n'
    )
    run = gradcli("check", "--show-config", "--atol", "1e-7", "--shard", "1/2")
    assert _header(run) == (
        "# configuration: pyproject.toml [tool.gradcli] "
        f"(the nearest pyproject.toml, searched from {tree} up to {tree})"
    )
    settings = _settings(run)
    assert settings["rtol"] == ("0.0001", "pyproject.toml [tool.gradcli] rtol")
    assert settings["atol"] == ("1e-07", "command line")
    assert settings["fail-on"] == ('["zero"]', "pyproject.toml [tool.gradcli.check] fail-on")
    assert settings["paths"] == (f'["{tree / "models"}"]', "pyproject.toml [tool.gradcli] paths")
    assert settings["mode"] == ('"auto"', "default")
    assert settings["shard"] == ("[1, 2]", "command line")
    assert not {"config", "isolated", "show-config"} & set(settings)  # not settings themselves


def test_show_config_needs_no_model(tree):
    # Commands whose MODEL is required still show their settings without one.
    for command in ("hessian", "logdet", "forward", "vjp", "jvp", "jacobian"):
        run = gradcli(command, "--show-config")
        assert run.stdout.startswith(f"# gradcli {command}: settings in force\n"), run
        assert _settings(run)["rng-seed"] == ("0", "default")


# --- paths in a configuration stay in its project -----------------------------------


@pytest.mark.parametrize("key, value", [
    ("paths", '["../elsewhere"]'),
    ("paths", '"/"'),
    ("junit-xml", '"../report.xml"'),
    ("summary", '"/tmp/summary.md"'),
])
def test_a_configuration_names_no_file_outside_its_project(tree, key, value):
    (tree / "pyproject.toml").write_text(f"[tool.gradcli]\n{key} = {value}\n")
    run = gradcli("check", "models/buggy.py")
    assert run.exit_code == 2, run
    shown = value.strip('[]"')
    assert error_line(run) == (
        f"Error: pyproject.toml [tool.gradcli] {key}: '{shown}' is outside {tree}, "
        "the project this configuration belongs to"
    )


def test_relative_paths_are_relative_to_the_configuration(tree, monkeypatch):
    (tree / "reports").mkdir()
    (tree / "pyproject.toml").write_text(
        '[tool.gradcli]\npaths = ["models/square.py"]\njunit-xml = "reports/gradcli.xml"\n'
    )
    shutil.copy(SAMPLES / "square.py", tree / "models" / "square.py")
    monkeypatch.chdir(tree / "models")
    run = gradcli("check")
    assert run.exit_code == 0, run
    assert (tree / "reports" / "gradcli.xml").is_file()
    assert not (tree / "models" / "reports").exists()
