"""The command layer: every command reads configuration, writes JSON, checks
output paths and reports errors the same way (gradcli.cli.command).

Truth: square.py is y = x * x at x = [1, 2] (dy/dx = diag(2, 4)); least_squares.py
is convex; realnvp_flow.py's declared log-det is exact; the flag and key names
come from each command's own parameters.
"""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

import gradcli
from gradcli.errors import UsageError
from tests.conftest import error_line, gradcli as run_cli, sample

SQUARE = sample("square.py")
LEAST_SQUARES = sample("least_squares.py")
FLOW = sample("realnvp_flow.py")

#: One cheap, successful invocation per command.
COMMANDS = {
    "check": [SQUARE],
    "hessian": [LEAST_SQUARES, "--no-fd-check"],
    "logdet": [FLOW],
    "forward": [SQUARE],
    "vjp": [SQUARE],
    "jvp": [SQUARE, "--tangent", "x=[1, 0]"],
    "jacobian": [SQUARE],
}


@pytest.fixture
def in_project(tmp_path, monkeypatch):
    def write(text: str):
        (tmp_path / "pyproject.toml").write_text(textwrap.dedent(text))
        monkeypatch.chdir(tmp_path)
        return tmp_path
    return write


# --- configuration --------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_rejects_unknown_keys_in_its_table(command, in_project):
    in_project(f"[tool.gradcli.{command}]\nfrobnicate = 1\n")
    run = run_cli(command, *COMMANDS[command])
    assert run.exit_code == 2, run
    assert error_line(run).startswith(
        f"Error: pyproject.toml [tool.gradcli.{command}] frobnicate: not an option of gradcli {command} (known: "
    )
    assert run.stdout == ""


def test_hessian_honours_its_table(in_project):
    """least squares is convex: a configured expect = "concave" must fail it."""
    in_project('[tool.gradcli.hessian]\nexpect = "concave"\nfd-check = false\n')
    run = run_cli("hessian", LEAST_SQUARES, "--json")
    assert run.exit_code == 1, run
    assert run.result["expect"] == "concave" and run.result["expectation_met"] is False
    assert run_cli("hessian", LEAST_SQUARES, "--expect", "convex").exit_code == 0  # the command line wins


def test_logdet_honours_its_table(in_project):
    in_project("[tool.gradcli.logdet]\natol = 0.5\nrtol = 0.25\n")
    run = run_cli("logdet", FLOW, "--json")
    assert run.exit_code == 0, run
    assert run.result["tolerance"]["atol"] == 0.5 and run.result["tolerance"]["rtol"] == 0.25


@pytest.mark.parametrize("command", ["forward", "vjp", "jvp", "jacobian"])
def test_inspect_commands_honour_their_table(command, in_project):
    """--set from the configuration moves the point: d(x*x)/dx at x = [3, 5] is diag(6, 10)."""
    in_project(f'[tool.gradcli.{command}]\nset = ["x=[3, 5]"]\n')
    doc = run_cli(command, *COMMANDS[command], "--json").result
    expected = {
        "forward": ("outputs", "output", [9.0, 25.0]),
        "vjp": ("gradients", "x", [6.0, 10.0]),
        "jvp": ("outputs", "output", [6.0, 0.0]),
    }
    if command == "jacobian":
        np.testing.assert_array_equal(doc["blocks"][0]["values"], [[6.0, 0.0], [0.0, 10.0]])
    else:
        key, name, values = expected[command]
        (found,) = [a for a in doc[key] if a["name"] == name]
        np.testing.assert_array_equal(found["values"], values)


def test_shared_key_applies_to_every_command_that_has_it(in_project):
    in_project("[tool.gradcli]\nrng-seed = 7\nrtol = 0.001\n")
    assert run_cli("check", SQUARE, "--json").result["models"][0]["tolerance"]["rtol"] == 0.001
    assert run_cli("logdet", FLOW, "--json").result["tolerance"]["rtol"] == 0.001


def test_a_range_rule_from_the_configuration_names_the_key(in_project):
    in_project("[tool.gradcli.hessian]\nzero-tol = -1\n")
    run = run_cli("hessian", LEAST_SQUARES)
    assert run.exit_code == 2, run
    assert error_line(run) == (
        "Error: pyproject.toml [tool.gradcli.hessian] zero-tol: must be >= 0, got -1.0"
    )


@pytest.mark.parametrize("value, problem", [
    ("-1", "must be between 0 and 2**32 - 1, got -1"),
    (str(2**32), f"must be between 0 and 2**32 - 1, got {2**32}"),
])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_seed_out_of_range_is_a_usage_error_everywhere(command, value, problem):
    run = run_cli(command, *COMMANDS[command], "--rng-seed", value)
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: Invalid value for '--rng-seed': {problem} (see 'gradcli {command} --help')"


def test_repeated_wrt_is_a_usage_error():
    run = run_cli("check", SQUARE, "--wrt", "x,x")
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: Invalid value for '--wrt': names 'x' more than once (see 'gradcli check --help')"
    run = run_cli("hessian", LEAST_SQUARES, "--wrt", "x", "--wrt", "x")
    assert run.exit_code == 2 and "names 'x' more than once" in error_line(run), run


# --- one JSON envelope ------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_json_envelope_of_every_command(command):
    run = run_cli(command, *COMMANDS[command], "--json")
    assert run.exit_code == 0, run
    document = run.json()
    assert set(document) == {"schema", "command", "ok", "exit_code", "error", "result"}
    assert (document["schema"], document["command"], document["ok"], document["exit_code"]) == (
        2, command, True, 0,
    )
    assert document["error"] is None and isinstance(document["result"], dict)


def test_json_envelope_of_a_model_that_cannot_load(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no weights')\n")
    run = run_cli("hessian", broken, "--json")
    assert run.exit_code == 3, run
    document = run.json()
    assert document["ok"] is False and document["exit_code"] == 3 and document["result"] is None
    assert document["error"] == f"{broken}:1: RuntimeError while importing the model file: no weights"
    assert error_line(run) == f"Error: {document['error']}"


def test_model_print_goes_to_stderr_and_json_stays_valid(tmp_path):
    chatty = tmp_path / "chatty.py"
    chatty.write_text(textwrap.dedent("""\
        print("hello from import")
        def model(x):
            print("hello from the forward pass")
            return x * x
        inputs = {"x": [1.0, 2.0]}
    """))
    for command in ("check", "vjp", "hessian"):
        run = run_cli(command, chatty, "--json")
        assert run.exit_code == 0, run
        assert run.json()["command"] == command  # stdout is exactly one document
        assert "hello from import" in run.stderr


# --- output paths are checked before any model runs -------------------------------


OUTPUTS = [
    ("check", "--junit-xml", "r.xml"),
    ("hessian", "--junit-xml", "r.xml"),
    ("hessian", "--save", "h.npz"),
    ("hessian", "--plot", "h.png"),
    ("forward", "--save", "f.npz"),
    ("vjp", "--save", "v.npz"),
    ("jvp", "--save", "j.npz"),
    ("jacobian", "--save", "j.npz"),
]


@pytest.mark.parametrize("command, flag, name", OUTPUTS)
def test_output_in_a_missing_folder_is_exit_2_before_the_model_runs(command, flag, name, tmp_path):
    marker = tmp_path / "ran"
    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\ndef model(x):\n    return x * x\ninputs = {{'x': [1.0, 2.0]}}\n")
    target = tmp_path / "no" / name
    extra = ["--tangent", "x=[1, 0]"] if command == "jvp" else []
    run = run_cli(command, model, *extra, flag, target)
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: Invalid value for '{flag}': folder of {target} does not exist (see 'gradcli {command} --help')"
    assert not marker.exists(), "the model file was imported before the usage error"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_output_in_a_read_only_folder_is_exit_2(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    run = run_cli("vjp", SQUARE, "--save", locked / "v.npz")
    assert run.exit_code == 2 and "is not writable" in error_line(run), run


def test_an_output_path_that_is_a_link_loop_is_exit_2_in_one_line(tmp_path):
    """A report path no stat can resolve (a link to itself) is a usage error
    when the option is read, not gradcli's internal error after the work."""
    loop = tmp_path / "loop.xml"
    loop.symlink_to(loop)
    run = run_cli("check", SQUARE, "--junit-xml", loop)
    assert run.exit_code == 2, run
    assert error_line(run) == (f"Error: Invalid value for '--junit-xml': {loop} is not writable: "
                               "Too many levels of symbolic links (see 'gradcli check --help')")


def test_a_device_or_fifo_is_written_in_place_whatever_its_folder_allows(tmp_path, monkeypatch):
    """An existing target that is not a regular file (/dev/stdout, a FIFO) is
    written where it is, nothing created beside it: a folder the user cannot
    write, as /dev is to anyone but root, does not refuse it (`--junit-xml
    /dev/stdout` run by a user was exit 2). Its own permission still counts.
    Truth: a FIFO in a folder whose write permission is denied here."""
    from gradcli.cli.options import problem_with_output

    folder = tmp_path / "locked"
    folder.mkdir()
    fifo = folder / "pipe"
    os.mkfifo(fifo)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *args, **kwargs: (
        False if os.fspath(path) == str(folder) and mode == os.W_OK else access(path, mode, *args, **kwargs)))
    assert problem_with_output(str(fifo), None) == ""
    assert problem_with_output(str(folder / "report.xml"), None) == f"{folder / 'report.xml'} is not writable"
    os.chmod(fifo, 0o400)
    if not access(fifo, os.W_OK):  # root writes whatever the bits say
        assert problem_with_output(str(fifo), None) == f"{fifo} is not writable"


@pytest.mark.parametrize("command, flag, name", OUTPUTS)
def test_output_where_no_file_can_be_created_is_exit_2_before_the_model_runs(command, flag, name, tmp_path):
    """/proc refuses new files. For root it passes every permission check,
    so the check creates the temporary file the writer would; for any other
    user its permission bits refuse it first. Either way the run stops before
    the model is imported, not with exit 3 after the work."""
    marker = tmp_path / "ran"
    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\ndef model(x):\n    return x * x\ninputs = {{'x': [1.0, 2.0]}}\n")
    target = f"/proc/{name}"
    extra = ["--tangent", "x=[1, 0]"] if command == "jvp" else []
    run = run_cli(command, model, *extra, flag, target)
    assert run.exit_code == 2, run
    why = ": cannot create a file in /proc (No such file or directory)" if os.access("/proc", os.W_OK) else ""
    assert error_line(run) == (
        f"Error: Invalid value for '{flag}': {target} is not writable{why} (see 'gradcli {command} --help')"
    )
    assert not marker.exists(), "the model file was imported before the usage error"


def test_output_with_the_wrong_suffix_is_exit_2(tmp_path):
    run = run_cli("hessian", LEAST_SQUARES, "--plot", tmp_path / "h.pdf")
    assert run.exit_code == 2, run
    assert f"'{tmp_path / 'h.pdf'}' must end in .png" in error_line(run)


def test_save_writes_the_result_arrays(tmp_path):
    target = tmp_path / "h.npz"
    run = run_cli("hessian", LEAST_SQUARES, "--no-fd-check", "--save", target)
    assert run.exit_code == 0, run
    saved = np.load(target)
    from gradcli.model.loading import load_model

    A = load_model(LEAST_SQUARES).point["A"]
    np.testing.assert_allclose(saved["eigenvalues"], np.linalg.eigvalsh(2 * A.T @ A), rtol=1e-10)


# --- the Python API -----------------------------------------------------------------


def test_api_hessian_and_vjp_take_a_callable():
    import tensorflow as tf

    result = gradcli.hessian(lambda x: tf.reduce_sum(x ** 3), inputs={"x": [1.0, -2.0]})
    np.testing.assert_allclose(sorted(result.spectrum.eigenvalues), [-12.0, 6.0], rtol=1e-12)  # 6 x
    assert result.spectrum.verdict == "indefinite" and result.ok
    vjp = gradcli.vjp(lambda x: tf.sin(x), {"output": [2.0, 3.0]}, inputs={"x": [0.5, 1.0]})
    np.testing.assert_allclose(vjp.arrays()["x"], [2 * np.cos(0.5), 3 * np.cos(1.0)], rtol=1e-14)


def test_api_jacobian_jvp_forward_take_a_callable_and_logdet_a_path():
    x = {"x": [1.0, 2.0]}
    assert gradcli.forward(lambda x: x * x, inputs=x).arrays()["output"].tolist() == [1.0, 4.0]
    assert gradcli.jvp(lambda x: x * x, {"x": [0.0, 1.0]}, inputs=x).arrays()["output"].tolist() == [0.0, 4.0]
    assert gradcli.jacobian(lambda x: x * x, inputs=x).arrays()["output/x"].tolist() == [[2.0, 0.0], [0.0, 4.0]]
    result = gradcli.logdet(FLOW)
    assert result.ok and result.worst.abs_error < 1e-12


@pytest.mark.parametrize("call, message", [
    (lambda: gradcli.check(SQUARE, rtol=-1), "rtol must be >= 0, got -1.0"),
    (lambda: gradcli.check(SQUARE, rtol="tight"), "rtol must be a number, got 'tight'"),
    (lambda: gradcli.check(SQUARE, probes=1.5), "probes must be an integer, got 1.5"),
    (lambda: gradcli.check(SQUARE, allow_surrogate=1), "allow_surrogate must be true or false, got 1"),
    (lambda: gradcli.hessian(LEAST_SQUARES, samples=3), "samples needs radius (the half-width of the box to sample)"),
    (lambda: gradcli.vjp(SQUARE, rng_seed=-1), "rng_seed must be between 0 and 2**32 - 1, got -1"),
])
def test_api_messages_name_keyword_arguments(call, message):
    with pytest.raises(UsageError) as raised:
        call()
    assert str(raised.value) == message


def test_api_exports_every_command_and_the_result_types():
    import gradcli.results as results

    for name in ("check", "forward", "vjp", "jvp", "jacobian", "hessian", "logdet"):
        function = getattr(gradcli, name)
        assert function.__doc__ and f"gradcli {name}" in function.__doc__, name
    for name in ("CheckResult", "HessianResult", "LogdetResult", "ForwardResult", "VjpResult",
                 "JvpResult", "JacobianResult"):
        assert name in results.__all__ and hasattr(results, name)


def test_a_pyproject_that_is_not_utf8_is_one_line_exit_2(tmp_path, monkeypatch):
    latin1 = b"[tool.gradcli]\nrtol = 1e-3 # caf\xe9\n"
    (tmp_path / "pyproject.toml").write_bytes(latin1)
    monkeypatch.chdir(tmp_path)
    run = run_cli("check", SQUARE)
    assert run.exit_code == 2, run
    offset = latin1.index(b"\xe9")
    assert error_line(run) == f"Error: pyproject.toml: not UTF-8 text (byte 0xe9 at offset {offset})"


def test_model_file_check_dict_values_are_type_checked(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("def model(x):\n    return x * x\ninputs = {'x': [1.0]}\ncheck = {'rng-seed': -3}\n")
    run = run_cli("check", model)
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: {model}: `check`: rng-seed must be between 0 and 2**32 - 1, got -3"
    model.write_text("def model(x):\n    return x * x\ninputs = {'x': [1.0]}\ncheck = {'rtol': True}\n")
    run = run_cli("check", model)
    assert run.exit_code == 2, run
    assert error_line(run) == f"Error: {model}: `check` key 'rtol' must be a number, got True"


# --- errors: one line, the documented exit code, a traceback only when asked -----------


def test_an_internal_error_is_one_line_exit_3_and_debug_shows_the_traceback(monkeypatch):
    from gradcli.analyses import inspection

    def broken(model):
        raise ZeroDivisionError("division by zero in a renderer")

    monkeypatch.setattr(inspection, "forward", broken)
    run = run_cli("forward", SQUARE)
    assert run.exit_code == 3, run
    assert error_line(run) == (
        "Error: internal error: ZeroDivisionError: division by zero in a renderer "
        "(run with --debug or GRADCLI_DEBUG=1 for the traceback)"
    )
    monkeypatch.setenv("GRADCLI_DEBUG", "1")
    run = run_cli("forward", SQUARE)
    assert isinstance(run.exception, ZeroDivisionError)


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_is_taken_where_the_internal_error_message_says_it(monkeypatch, where):
    """The message says 'run with --debug': after the command's own options
    too, not only as ``gradcli --debug COMMAND``."""
    from gradcli.analyses import inspection

    def broken(model):
        raise ZeroDivisionError("division by zero in a renderer")

    monkeypatch.setattr(inspection, "forward", broken)
    monkeypatch.delenv("GRADCLI_DEBUG", raising=False)
    args = ["--debug", "forward", SQUARE] if where == "before" else ["forward", SQUARE, "--debug"]
    try:
        run = run_cli(*args)
    finally:  # --debug sets it for the library; monkeypatch would restore it at teardown
        os.environ.pop("GRADCLI_DEBUG", None)
    assert isinstance(run.exception, ZeroDivisionError), run


def test_an_internal_error_in_one_model_is_its_error_row_and_the_batch_goes_on(monkeypatch, tmp_path):
    from gradcli.analyses.check import model as check_module

    real = check_module.check_model

    def flaky(model, options, *rest):
        if model.name.endswith("square.py"):
            raise KeyError("surprise")
        return real(model, options, *rest)

    monkeypatch.setattr(check_module, "check_model", flaky)
    report = tmp_path / "r.xml"
    run = run_cli("check", SQUARE, sample("buggy_custom_gradient.py"), sample("two_by_two.py"),
                  "--json", "--junit-xml", report)
    assert run.exit_code == 3, run
    models = run.json()["result"]["models"]
    assert [m["ok"] for m in models] == [False, False, True]
    assert models[0]["error"].endswith(
        "square.py: internal error: KeyError: 'surprise' (run with --debug or GRADCLI_DEBUG=1 for the traceback)")
    assert models[0]["error_code"] == 3 and models[1]["error"] is None and not models[1]["ok"]
    import xml.etree.ElementTree as ET

    root = ET.parse(report).getroot()
    assert root.get("errors") == "1" and int(root.get("failures")) >= 1


def test_a_full_stdout_is_exit_3_with_one_line():
    import subprocess
    import sys

    from tests.conftest import ROOT

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gradcli", "forward", SQUARE, "--json"], stdout=full,
            stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == ["Error: cannot write the report: No space left on device"]


def test_a_command_run_in_its_own_process_ends_with_its_report_code_and_exit_handlers(tmp_path):
    """Checked in gradcli's own process (``GRADCLI_IN_PROCESS``, TensorFlow
    imported there), the command skips the interpreter's finalization
    (``cli._exit``): what an exit does for the run must still happen. The
    report is whole on stdout, the exit code is the verdict's, and the model's
    own exit handler ran."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT, fixture

    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "check", fixture("atexit_marker.py"), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GRADCLI_IN_PROCESS": "1", "GRADCLI_TEST_MARKER": str(marker)},
    )
    assert done.returncode == 0, done.stderr
    (model,) = json.loads(done.stdout)["result"]["models"]
    assert model["ok"] and model["pairs"][0]["verdict"] == "pass"
    assert marker.read_text() == "ran"
    failing = subprocess.run(
        [sys.executable, "-m", "gradcli", "check", sample("buggy_custom_gradient.py"), "-q"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GRADCLI_IN_PROCESS": "1"},
    )
    assert failing.returncode == 1, failing.stderr
    assert failing.stdout.strip().splitlines()[-1] == "0 of 1 model passed"


def test_a_usage_error_after_parsing_still_prints_its_json_document():
    run = run_cli("vjp", SQUARE, "--set", "x=abc", "--json")
    assert run.exit_code == 2, run
    document = run.json()
    message = "--set x: 'abc' is not a number, a JSON array or @FILE.npy / @FILE.npz:KEY"
    assert document == {"schema": 2, "command": "vjp", "ok": False, "exit_code": 2,
                        "error": message, "result": None}
    assert error_line(run) == f"Error: {message}"


def test_a_message_that_turns_a_flag_off_spells_it_where_it_is_shown():
    """``{@by_layer=false}``: the command line's ``--no-by-layer`` (``--by-layer off`` was
    no flag), the API's ``by_layer=False``, and a template that travels kept as it is."""
    from gradcli.errors import UsageError, spell_text

    text = "check the whole model only ({@by_layer=false}), or fewer ({@probes=4})"
    assert spell_text(text, lambda name: "--" + name.replace("_", "-")) == (
        "check the whole model only (--no-by-layer), or fewer (--probes 4)")
    assert spell_text(text, lambda name: name) == "check the whole model only (by_layer=False), or fewer (probes=4)"
    assert UsageError(text).template == text
