"""The command line itself: start-up, help, version, entry points."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, gradcli


def test_help_does_not_import_tensorflow():
    code = (
        "import sys; from gradcli.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip().endswith("False"), out


def test_usage_error_does_not_import_tensorflow():
    code = (
        "import sys; from gradcli.cli import main\n"
        "try:\n    main(['check', 'x.py', '--mode', 'wavy'])\nexcept SystemExit as e:\n    print(e.code)\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split() == ["2", "False"], out


def test_python_m_gradcli_version():
    out = subprocess.run(
        [sys.executable, "-m", "gradcli", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == "gradcli, version 0.1.0", out


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
