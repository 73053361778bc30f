"""Model files run by ``pytest --gradcli`` and ``assert_gradients_ok(path)`` run
in supervised worker processes, never in pytest's own (gradcli/pytest_plugin.py,
gradcli/testing.py): a model that ends its process fails its own item and the
run goes on. These run with GRADCLI_IN_PROCESS=1 (tests/conftest.py), which
must not bring the models into pytest's process.

Each model records the process that imports it, so the tests see where it ran.
"""

from __future__ import annotations

import os
import textwrap

import pytest

from conftest import SAMPLES

pytest_plugins = ["pytester"]

#: Appended to every model file: writes "pid" into the folder $WHERE_LOG.
RECORD = textwrap.dedent("""
    import os as _os
    _log = _os.environ.get("WHERE_LOG")
    if _log:
        with open(_os.path.join(_log, _os.path.basename(__file__) + "." + str(_os.getpid())), "w"):
            pass
""")

#: A model file (it defines `model`, so a folder walk takes it) that ends its process on import.
EXIT_ON_IMPORT = "import os\n\ndef model(x):\n    return x\n\nos._exit(0)\n"
@pytest.fixture(scope="module")
def imported_first():
    """pytester drops the modules an in-process run imported when it ends, and
    numpy refuses to be imported twice in one process: import what the plugin
    uses before pytester takes its snapshot (higher-scoped fixtures come first)."""
    import gradcli.workers.batch, gradcli.cli.check, gradcli.render.text, gradcli.results  # noqa: F401, E401


@pytest.fixture
def project(imported_first, pytester, monkeypatch, tmp_path):
    """models/: a correct one, a correct one named like a test module, and,
    checked last of the three, one that ends its process (exit code 0) while
    imported; test_plain.py runs after them."""
    assert os.environ.get("GRADCLI_IN_PROCESS") == "1"  # the in-process setting stays harmless
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("WHERE_LOG", str(log))
    models = pytester.mkdir("models")
    square = (SAMPLES / "square.py").read_text()
    for name, source in {
        "z_exits.py": RECORD + EXIT_ON_IMPORT,
        "c_square.py": square + RECORD,
        "test_square_model.py": square + RECORD,
    }.items():
        (models / name).write_text(source)
    pytester.makepyprojecttoml('[tool.gradcli]\npaths = ["models"]\n')
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    return pytester, log


def _importers(log) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for entry in os.listdir(log):
        name, _, pid = entry.rpartition(".")
        found.setdefault(name, set()).add(int(pid))
    return found


def test_a_model_that_ends_its_process_fails_its_item_and_the_run_goes_on(project):
    pytester, log = project
    result = pytester.runpytest("--gradcli", "-p", "no:cacheprovider", "-rf", "-v")
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["models/z_exits.py::gradcli FAILED*", "test_plain.py::test_plain PASSED*"])
    # The failure section holds one line: the message, no traceback.
    result.stdout.fnmatch_lines([
        "_* gradcli check models/z_exits.py _*",
        "gradcli check: error: models/z_exits.py: the model ended the process (exit code 0)",
        "=* short test summary info =*",
        "FAILED models/z_exits.py::gradcli - gradcli check: error: *",
    ], consecutive=True)
    assert "Traceback" not in result.stdout.str()
    importers = _importers(log)
    assert set(importers) == {"z_exits.py", "c_square.py", "test_square_model.py"}
    assert os.getpid() not in set().union(*importers.values())  # pytester runs pytest in this process


@pytest.mark.parametrize("named", [False, True])
def test_collecting_imports_no_model_file(project, named):
    # test_square_model.py matches python_files, and a file named on the command
    # line is collected by pytest whatever its name: only the gradcli item is.
    pytester, log = project
    args = ["models/test_square_model.py"] if named else []
    result = pytester.runpytest("--gradcli", "--collect-only", "-q", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK
    items = [line for line in result.stdout.lines if "::" in line]
    expected = ["models/test_square_model.py::gradcli"] if named else [
        "models/c_square.py::gradcli", "models/test_square_model.py::gradcli",
        "models/z_exits.py::gradcli", "test_plain.py::test_plain",
    ]
    assert sorted(items) == expected
    assert os.listdir(log) == []  # nothing imported a model, here or elsewhere


def test_assert_gradients_ok_runs_a_model_file_in_a_worker(imported_first, tmp_path, monkeypatch):
    from gradcli.testing import assert_gradients_ok

    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("WHERE_LOG", str(log))
    model = tmp_path / "exits.py"
    model.write_text(RECORD + EXIT_ON_IMPORT)
    with pytest.raises(AssertionError) as raised:
        assert_gradients_ok(str(model))
    assert f"{model}: the model ended the process (exit code 0)" in str(raised.value)
    (entry,) = os.listdir(log)
    assert int(entry.rpartition(".")[2]) != os.getpid()
