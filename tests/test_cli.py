"""The command line itself: start-up, help, version, entry points."""

from __future__ import annotations

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
