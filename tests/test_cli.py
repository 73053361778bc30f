"""The command line itself: start-up, help, version, entry points."""

from __future__ import annotations

import importlib.machinery
import sys

import pytest

from conftest import fresh_process, gradcli


def test_usage_error_does_not_import_tensorflow():
    # --help is covered with the other heavy modules in test_ci.py
    assert fresh_process("check", "x.py", "--mode", "wavy") == (2, [])


def test_unknown_command_exits_2_with_one_line():
    run = gradcli("frobnicate")
    assert run.exit_code == 2
    assert run.stderr.strip().splitlines() == [
        "Error: No such command 'frobnicate'. (see 'gradcli --help')"
    ]


def test_check_without_model_is_usage_error():
    run = gradcli("check")
    assert run.exit_code == 2
    assert run.stderr.strip().splitlines() == [
        "Error: no MODEL given and no `paths` in [tool.gradcli] of a pyproject.toml "
        "(see 'gradcli check --help')"
    ]


def test_a_missing_model_file_is_one_line_and_exit_2_before_tensorflow(tmp_path):
    """``gradcli check nope.py`` (and a missing file among others): the usage
    error of docs/reference/exit-codes.md, one line, nothing on stdout, and
    neither TensorFlow nor Keras imported (read from ``sys.modules`` of the run)."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT, sample

    code = (
        "import json, sys\nfrom gradcli.cli import cli\n"
        "code = cli.main(sys.argv[1:], standalone_mode=False)\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
        "print(json.dumps([code, heavy]), file=sys.stderr)\n"
    )
    for argv, shown in ((["nope.py"], "nope.py"), ([sample("square.py"), "gone/nope.py:model"], "gone/nope.py")):
        done = subprocess.run(
            [sys.executable, "-c", code, "check", *argv], cwd=tmp_path, capture_output=True, text=True,
            timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        *lines, last = done.stderr.strip().splitlines()
        assert json.loads(last) == [2, []], done.stderr
        assert lines == [f"Error: no such model file: {shown}"], done.stderr
        assert done.stdout == ""


def test_the_suite_runs_on_every_core_unless_told_otherwise():
    """``pytest`` alone spreads the tests over xdist workers (-n auto; the
    count pinned here by PYTEST_XDIST_AUTO_NUM_WORKERS); ``-p no:xdist`` and
    ``-n 0`` keep one process."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTEST_XDIST_AUTO_NUM_WORKERS="2", PYTHONPATH=str(ROOT))
    test = "tests/test_cli.py::test_unknown_command_exits_2_with_one_line"
    outputs = {}
    for extra in ((), ("-p", "no:xdist"), ("-n", "0")):
        done = subprocess.run([sys.executable, "-m", "pytest", test, *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs[extra] = done.stdout
    assert "created: 2/2 workers" in outputs[()], outputs[()]
    assert "workers" not in outputs[("-p", "no:xdist")] and "workers" not in outputs[("-n", "0")]


def test_keras_imports_pyplot_lazily_with_tensorflow():
    """Keras imports matplotlib.pyplot with TensorFlow when matplotlib is
    installed. While gradcli imports TensorFlow, pyplot is found by Python's
    own path finder with its loader made lazy: the module object is made and
    registered, and runs only when an attribute of it is first read. The
    finder is gone once the import is done."""
    pytest.importorskip("matplotlib")
    import importlib.util

    import matplotlib

    from gradcli.tf_import import LazyPyplot, import_tensorflow

    import_tensorflow()
    assert not any(isinstance(finder, LazyPyplot) for finder in sys.meta_path)
    assert LazyPyplot().find_spec("matplotlib.figure", matplotlib.__path__) is None  # pyplot only
    spec = LazyPyplot().find_spec("matplotlib.pyplot", matplotlib.__path__)
    assert isinstance(spec.loader, importlib.util.LazyLoader)
    assert spec.origin == importlib.machinery.PathFinder.find_spec("matplotlib.pyplot", matplotlib.__path__).origin
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Not run: its namespace holds only what the import system set.
    assert "figure" not in object.__getattribute__(module, "__dict__")
    assert type(module).__name__ == "_LazyModule"
