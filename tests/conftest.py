"""Shared test helpers. TensorFlow is imported once per session (by the first
test that needs it); model files are small so each loads in milliseconds."""

from __future__ import annotations

import json
import os
import subprocess
from functools import lru_cache
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradcli.cli import cli, end_process

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
FIXTURES = Path(__file__).resolve().parent / "models"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One thread per test process for TensorFlow's and oneDNN's pools (set before
# TensorFlow is imported; a value the caller set is kept): the tests run small
# models, whose ops gain nothing from a pool, and xdist already keeps every core
# busy with a process each. On a machine busy with other work, two workers of
# two threads each on two cores cost test_verdicts.py and test_diagnose.py 29 s
# of CPU (52 s wall) against 21 s (23 s) with one; on a quiet one the whole
# suite took the same either way (6:56). Subprocesses the tests start inherit it.
for _variable in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
# CliRunner checks run in this process: a worker per call would import TensorFlow
# each time. tests/test_edges_process.py runs the supervised workers for real.
os.environ.setdefault("GRADCLI_IN_PROCESS", "1")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``pytest`` uses the machine's cores (pytest-xdist's ``-n auto``): the
    suite spends most of its time in TensorFlow, one test at a time. Not when
    the run says otherwise (``-n``/``--numprocesses``, ``--dist``, ``--tx``),
    when xdist is absent or disabled (``pytest -p no:xdist``: one process), or
    inside an xdist worker. Runs before xdist's own hook, which turns
    ``auto`` into a count (and into one process under ``--pdb``)."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    option = config.option
    if option.numprocesses is None and option.dist == "no" and not option.tx:
        option.numprocesses = "auto"
        # Tests spread one by one, but a module whose module-scoped fixture is costly
        # (processes that import TensorFlow, a model built once) is one group
        # (``pytest.mark.xdist_group``) on one worker: spread, each worker ran the
        # fixture again (test_report_faults' seven launches: 24 s on each worker).
        option.dist = "loadgroup"


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """An xdist worker (``config.workerinput``, set on workers only) ends here:
    its results were sent at session finish (xdist's ``workerfinished``) and
    every plugin has unconfigured. It ends as a gradcli command run in its
    own process does (``gradcli.cli.end_process``): the atexit handlers run
    (gradcli's own ends the workers a test left running and removes their
    folders), then the process ends without the interpreter's finalization.
    That finalization is TensorFlow's teardown after hundreds of checks, and
    the main process waited for it at the end of every run: from the last
    test to the summary, 8.5 s of a full run (both cores idle) and 4.1 s of a
    two-module run, against 1.7 s with this exit."""
    if not hasattr(config, "workerinput"):
        return
    end_process(0)


def as_a_terminal_job() -> None:
    """``preexec_fn`` of a command a test sends Ctrl-C (SIGINT) to: SIGINT and
    SIGQUIT at their defaults, as in a terminal's foreground job. A shell that
    starts ``pytest`` as a background job without job control (``pytest &``
    in a script, some CI runners) starts it with both ignored, and every
    process it starts inherits that across exec: the command would never
    see the Ctrl-C (the 4 interrupt tests failed that way)."""
    import signal

    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


def grouped_modules() -> set[str]:
    """The test modules (paths as in node ids) that declare themselves one
    xdist group (``pytestmark = pytest.mark.xdist_group(__name__)``)."""
    return {
        f"tests/{path.name}" for path in Path(__file__).parent.glob("test_*.py")
        if "pytestmark = pytest.mark.xdist_group(" in path.read_text()
    }


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown under ``-p no:xdist``
def pytest_xdist_make_scheduler(config, log):
    """``loadgroup``, each grouped module one unit of work on one worker, by its
    node ids: xdist's own loadgroup reads the group from a suffix its workers
    add to each node id, which pytest 9.2 no longer keeps (pytest-xdist issue
    1386: every test then spreads alone, and each worker set the module's
    fixture up again: test_report_faults' 25 s twice). Other tests spread one
    by one, as ``load`` spreads them."""
    if config.option.dist != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    grouped = grouped_modules()

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in grouped else nodeid

    return ModuleGroups(config, log)


class Run:
    """The outcome of one CLI call, with stdout and stderr kept apart."""

    def __init__(self, result):
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.exception = result.exception

    def json(self):
        return json.loads(self.stdout)

    @property
    def result(self):
        """The command's result from the ``--json`` envelope (schema 2)."""
        document = self.json()
        assert document["schema"] == 2 and document["error"] is None, self
        return document["result"]

    def __repr__(self):  # shown by pytest when an assertion on a Run fails
        return f"<Run exit={self.exit_code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}>"


def error_line(run: Run) -> str:
    """The one line a failed run prints: exactly one non-empty line on stderr,
    ``Error: ...``, and no traceback on either stream."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), run
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, run
    return lines[0]


def line_of(path, text: str) -> int:
    """The 1-based line of the first line of ``path`` containing ``text``: tests
    read source lines from fixture files instead of hard-coding them."""
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if text in line:
                return number
    raise AssertionError(f"{text!r} not in {path}")


@lru_cache(maxsize=None)
def check_json(path: str, *options: str):
    """``gradcli check PATH --json OPTIONS`` once per argument list (cached:
    several tests read one run): the run and its JSON document."""
    run = gradcli("check", path, "--json", *options)
    return run, run.json()


def only_model(document) -> dict:
    """The one model of a check document."""
    (model,) = document["result"]["models"]
    return model


def pairs(document) -> dict:
    """(input, output) -> pair of the one model in a check document."""
    return {(p["input"], p["output"]): p for p in only_model(document)["pairs"]}


def gradcli(*args, env=None) -> Run:
    runner = CliRunner(env={"COLUMNS": "200", **(env or {})})
    result = runner.invoke(cli, [str(a) for a in args], prog_name="gradcli", catch_exceptions=True)
    return Run(result)


@pytest.fixture
def run():
    return gradcli


def sample(name: str) -> str:
    return str(SAMPLES / name)


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def fresh_process(*argv) -> tuple[int, list[str]]:
    """Run gradcli's command line in a new interpreter; return its exit code and
    which of TensorFlow and Keras it imported (for start-up tests)."""
    code = (
        "import json, sys\nfrom gradcli.cli import cli\n"
        f"code = cli.main({[str(a) for a in argv]!r}, standalone_mode=False)\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
        "print(json.dumps([code, heavy]), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    exit_code, heavy = json.loads(done.stderr.strip().splitlines()[-1])
    return exit_code, heavy


def central_jacobians(forward, x, h):
    """Each example's Jacobian of ``forward`` (a numpy map of ``[batch, n]`` arrays)
    by central differences in float64: ``[batch, n, n]``, an independent truth
    for the flow tests (truncation ~h^2, round-off ~eps/h)."""
    import numpy as np

    batch, n = x.shape
    jacobians = np.zeros((batch, n, n))
    for j in range(n):
        step = np.zeros_like(x)
        step[:, j] = h
        jacobians[:, :, j] = (forward(x + step) - forward(x - step)) / (2 * h)
    return jacobians
