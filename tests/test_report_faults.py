"""Reports under faults: a full disk or ``ulimit -f``, a closed or broken
stdout, Ctrl-C and SIGTERM in the middle of a batch, characters XML cannot
hold.

Truth: the faults are made here (RLIMIT_FSIZE in the child, a tmpfs filled to
the last page, a pipe whose reader is closed, a closed descriptor 1, a signal
once the fixture model says it is running), so what must survive is known: no
report file holds a previous run's or a partial report, no temporary file is
left, the exit code and the one ``Error:`` line are the documented ones.
square.py is y = x * x at x = [1, 2], so its Jacobian is diag(2, 4) and its
one pair passes; faults_sleep.py sleeps while imported; faults_ansi_error.py
raises with the message ``MESSAGE``.

The command-line runs import TensorFlow (seconds each), so they start together
in one module fixture and each test reads its own; the mechanisms themselves
(atomic replacement, checked writes, XML text) are tested directly.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradcli.render import files, writing
from gradcli.render.junit import Case, document, xml_text
from tests.conftest import ROOT, as_a_terminal_job, fixture, sample

#: One worker runs this module: its module-scoped fixture is costly (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

SQUARE = sample("square.py")
SLEEP = fixture("faults_sleep.py")
BUGGY = sample("buggy_custom_gradient.py")  # never reached: the batch is interrupted before it
ANSI = fixture("faults_ansi_error.py")
#: What faults_ansi_error.py raises.
MESSAGE = "\x1b[31mred\x1b[0m text, NUL \x00, ESC \x1b, BEL \x07, FF \x0c, surrogate \udcff, \ufffe end"
#: A passing JUnit report, as a previous run would have left it.
PASSING = ('<?xml version="1.0"?><testsuites tests="1" failures="0" errors="0"><testsuite name="old">'
           '<testcase classname="old" name="x"/></testsuite></testsuites>\n')
#: Bytes a file may grow to under ``ulimit -f`` in the run that hits it.
FILE_LIMIT = 300


def temporaries(folder: Path) -> list[str]:
    """Temporary report files (``.NAME.XXXX.SUFFIX``) left in ``folder``."""
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def shown(run) -> str:
    return f"exit={run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"


def one_error_line(run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), shown(run)
    assert "Traceback" not in run.stderr, shown(run)
    return lines[0]


# --- the command-line runs, started together ---------------------------------


class Launch:
    """One gradcli process: its arguments, how it is started, and (``signal``)
    what it gets once the sleeping fixture model has started."""

    def __init__(self, folder: Path, *args, in_process=True, stdout=None, stderr=None, preexec=None,
                 send=None, group=False, bytecode=True):
        self.folder = folder
        self.args = [str(a) for a in args]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
                    "PYTHONUNBUFFERED": "1", "GRADCLI_TEST_STARTED": str(folder / "started")}
        if not bytecode:
            self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        if not in_process:
            self.env.pop("GRADCLI_IN_PROCESS", None)
        else:
            self.env["GRADCLI_IN_PROCESS"] = "1"
        self.stdout, self.stderr, self.preexec = stdout, stderr, preexec
        self.send, self.group = send, group
        self.signalled = False

    def start(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gradcli", *self.args], cwd=self.folder, env=self.env,
            stdout=subprocess.PIPE if self.stdout is None else self.stdout,
            stderr=subprocess.PIPE if self.stderr is None else self.stderr,
            preexec_fn=self.preexec or (as_a_terminal_job if self.send == signal.SIGINT else None),
            start_new_session=True,
        )

    def poke(self) -> None:
        """Send the signal once the batch has reached the sleeping model."""
        if self.send and not self.signalled and (self.folder / "started").exists():
            time.sleep(0.3)  # into the model's sleep
            if self.group:
                os.killpg(self.process.pid, self.send)  # as a terminal's Ctrl-C
            else:
                self.process.send_signal(self.send)  # as `kill PID` or a CI runner
            self.signalled = True


def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def _close_stdout():
    os.close(1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> (folder, CompletedProcess) for every command-line fault."""
    folders = {name: tmp_path_factory.mktemp(name) for name in
               ("full", "closed", "pipe", "both", "sigint", "sigterm", "ansi")}
    for name in ("full", "sigint", "sigterm"):
        (folders[name] / "report.xml").write_text(PASSING)
        (folders[name] / "summary.md").write_text("earlier step\n")
    reader, writer = os.pipe()
    os.close(reader)  # a pipe nobody reads: every write is EPIPE
    full_stdout = open(folders["full"] / "stdout.json", "wb")
    batch = (SQUARE, SLEEP, BUGGY)
    launches = {
        # No bytecode under the limit: CPython would leave gradcli's own .pyc
        # files cut at FILE_LIMIT bytes in this source tree, and every later
        # process of the run would fail to import gradcli (a model's own files
        # are guarded by gradcli: importing.bytecode_would_be_cut).
        "full": Launch(folders["full"], "check", SQUARE, "--json", "--junit-xml", "report.xml",
                       "--summary", "summary.md", stdout=full_stdout, preexec=_limit_file_size,
                       bytecode=False),
        "closed": Launch(folders["closed"], "check", SQUARE, "--junit-xml", "report.xml",
                         in_process=False, stdout=subprocess.DEVNULL, preexec=_close_stdout),
        "pipe": Launch(folders["pipe"], "check", SQUARE, "--junit-xml", "report.xml", stdout=writer),
        "both": Launch(folders["both"], "check", SQUARE, "--json", stdout=writer, stderr=writer),
        "sigint": Launch(folders["sigint"], "check", *batch, "--json", "--junit-xml", "report.xml",
                         "--summary", "summary.md", in_process=False, send=signal.SIGINT, group=True),
        "sigterm": Launch(folders["sigterm"], "check", *batch, "--json", "--junit-xml", "report.xml",
                          "--summary", "summary.md", in_process=False, send=signal.SIGTERM),
        "ansi": Launch(folders["ansi"], "check", ANSI, SQUARE, "--json", "--junit-xml", "report.xml"),
    }
    for launch in launches.values():
        launch.start()
    os.close(writer)
    full_stdout.close()
    deadline = time.monotonic() + 240
    try:
        while any(l.process.poll() is None for l in launches.values()) and time.monotonic() < deadline:
            for launch in launches.values():
                launch.poke()
            time.sleep(0.1)
    finally:
        for launch in launches.values():
            if launch.process.poll() is None:
                os.killpg(launch.process.pid, signal.SIGKILL)
    done = {}
    for name, launch in launches.items():
        stdout, stderr = launch.process.communicate()
        done[name] = (folders[name], subprocess.CompletedProcess(
            launch.args, launch.process.returncode, (stdout or b"").decode(), (stderr or b"").decode()))
    return done


def test_a_file_size_limit_fails_every_report_in_one_line_and_leaves_none(runs):
    """``ulimit -f``: stdout's JSON, the JUnit file and the summary each hit the
    limit. Exit 3, one line naming all three; the stdout file holds no partial
    document, the previous (passing) JUnit file is gone, the summary keeps its
    earlier content exactly, and no temporary file is left."""
    folder, run = runs["full"]
    assert run.returncode == 3, shown(run)
    line = one_error_line(run)
    assert line == ("Error: cannot write the report: File too large; cannot write report.xml: "
                    "File too large; cannot write summary.md: File too large"), line
    assert (folder / "stdout.json").read_bytes() == b""
    assert not (folder / "report.xml").exists()
    assert (folder / "summary.md").read_text() == "earlier step\n"
    assert temporaries(folder) == []


def test_a_closed_stdout_is_exit_3_and_blames_no_model(runs):
    """``>&-``: the worker checks the model (the JUnit file has its passing
    testcase, no error), and the run ends with the documented line."""
    folder, run = runs["closed"]
    assert run.returncode == 3, shown(run)
    assert one_error_line(run) == "Error: cannot write the report: stdout is closed"
    suite = ET.parse(folder / "report.xml").getroot()
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "0", "0")
    assert "ended the process" not in run.stderr


def test_a_broken_pipe_is_exit_3_with_one_line_and_the_files_still_written(runs):
    folder, run = runs["pipe"]
    assert run.returncode == 3, shown(run)
    assert one_error_line(run) == "Error: cannot write the report: Broken pipe"
    suite = ET.parse(folder / "report.xml").getroot()
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "0", "0")
    assert temporaries(folder) == []


def test_a_broken_stdout_and_stderr_leave_the_exit_code_alone_to_tell(runs):
    """Nowhere to write the report or the error line: exit 3 all the same
    (not click's 1, not Python's 120 for a failed flush at exit)."""
    folder, run = runs["both"]
    assert run.returncode == 3, shown(run)


@pytest.mark.parametrize("name, code, line", [
    ("sigint", 130, "Error: interrupted"),
    ("sigterm", 143, "Error: terminated (SIGTERM)"),
])
def test_an_interrupted_batch_reports_the_finished_models_marked_interrupted(runs, name, code, line):
    """Ctrl-C to the process group, or SIGTERM to gradcli alone, while the
    second of three models runs: JSON, JUnit and summary hold square.py's
    finished check (Jacobian diag(2, 4)) and say the run was interrupted; the
    previous run's passing JUnit file is replaced, not left."""
    folder, run = runs[name]
    assert run.returncode == code, shown(run)
    assert one_error_line(run) == line
    document = json.loads(run.stdout)
    assert (document["ok"], document["exit_code"], document["error"]) == (False, code, line[len("Error: "):])
    (model,) = document["result"]["models"]
    (pair,) = model["pairs"]
    assert model["name"] == SQUARE and pair["verdict"] == "pass"
    assert pair["worst"]["analytic"] == pytest.approx(4.0, rel=1e-9)  # d(x1^2)/dx1 at x1 = 2
    assert document["result"]["skipped"] == [SLEEP, BUGGY]

    suite = ET.parse(folder / "report.xml").getroot()
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("3", "2", "0")
    cases = suite.findall("./testsuite/testcase")
    assert cases[0].get("classname") == SQUARE and list(cases[0]) == []
    assert [c.find("error").get("type") for c in cases[1:]] == ["interrupted", "interrupted"]

    summary = (folder / "summary.md").read_text()
    assert summary.startswith("earlier step\n## gradcli check: interrupted after 1 of 3 models (1 passed)\n")
    assert summary.count("**not finished**") == 2
    assert temporaries(folder) == []


def test_control_characters_in_an_error_stay_exact_in_json_and_readable_in_junit(runs):
    folder, run = runs["ansi"]
    assert run.returncode == 3, shown(run)
    models = json.loads(run.stdout)["result"]["models"]
    assert models[0]["error"].endswith(MESSAGE)  # JSON keeps every character
    suite = ET.parse(folder / "report.xml").getroot()  # expat refuses any forbidden character
    error = suite.find("./testsuite/testcase/error")
    expected = ("red text, NUL \\x00, ESC \\x1b, BEL \\x07, FF \\x0c, surrogate \\udcff, \\ufffe end")
    assert error.get("message").endswith(expected) and error.text.endswith(expected)
    assert (suite.get("tests"), suite.get("errors")) == ("2", "1")


# --- the mechanisms -------------------------------------------------------------


#: XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
XML_CHARS = [(0x9, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]
#: Its complement: C0 controls but tab, LF and CR; the surrogates; U+FFFE and U+FFFF.
NOT_XML_CHARS = [(0x0, 0x8), (0xB, 0xC), (0xE, 0x1F), (0xD800, 0xDFFF), (0xFFFE, 0xFFFF)]


def _codes(ranges) -> list[int]:
    return [code for low, high in ranges for code in range(low, high + 1)]


def test_xml_text_leaves_only_characters_xml_allows_and_keeps_those_it_allows():
    allowed, forbidden = _codes(XML_CHARS), _codes(NOT_XML_CHARS)
    assert len(set(allowed) | set(forbidden)) == 0x110000  # the two lists cover every code point
    text = "".join(map(chr, allowed))
    assert xml_text(text) == text
    for code in forbidden:
        if code != 0x1B:  # ESC alone: the escape below; ESC sequences: dropped whole
            assert xml_text(chr(code)) == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    assert xml_text("\x1b") == "\\x1b"


@pytest.mark.parametrize("raw, clean", [
    ("\x1b[31mred\x1b[0m", "red"),  # colours
    ("\x1b[1;38;5;196mbold\x1b[m", "bold"),
    ("\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\", "link"),  # an OSC hyperlink
    ("a\x1bMb", "ab"),  # a two-character escape
    ("tab\tline\ncr\r", "tab\tline\ncr\r"),
])
def test_xml_text_drops_ansi_sequences_whole(raw, clean):
    assert xml_text(raw) == clean


def test_every_junit_text_and_attribute_is_cleaned():
    import io

    nasty = "a\x00b\x1b[0mc\udcffd"
    case = Case(nasty, nasty, 0.0, "failure", nasty, nasty, nasty, nasty)
    tree = document([case], nasty)
    buffer = io.BytesIO()
    tree.write(buffer, encoding="utf-8", xml_declaration=True)
    root = ET.fromstring(buffer.getvalue())
    node = root.find("./testsuite/testcase")
    values = [root.find("./testsuite").get("name"), node.get("classname"), node.get("name"),
              node.find("failure").get("message"), node.find("failure").get("type"),
              node.find("failure").text, node.find("system-out").text]
    assert values == ["a\\x00bc\\udcffd"] * 7


def _write_failing_halfway(temp):
    with open(temp, "wb") as handle:
        handle.write(b"<testsuites")
    raise OSError(28, "No space left on device")


def test_a_failed_replacement_leaves_the_target_and_no_temporary(tmp_path):
    target = tmp_path / "report.xml"
    target.write_text(PASSING)
    with pytest.raises(OSError):
        writing.replace_file(str(target), _write_failing_halfway)
    assert target.read_text() == PASSING and temporaries(tmp_path) == []


def test_a_replacement_is_whole_keeps_the_mode_and_writes_devices_in_place(tmp_path):
    target = tmp_path / "report.xml"
    target.write_text("old")
    target.chmod(0o640)
    writing.replace_file(str(target), lambda temp: Path(temp).write_text("new"))
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    assert temporaries(tmp_path) == []
    writing.replace_file(os.devnull, lambda path: Path(path).write_text("x"))
    assert not Path(os.devnull).is_file()  # still the device, not a file renamed over it


def test_a_run_starts_by_removing_the_report_files_a_previous_run_left(tmp_path):
    """--junit-xml, --plot and --save targets go when the run starts (whatever
    ends it, none is left to read as this run's); --summary is appended to and
    stays; an option the command does not have is not touched."""
    from gradcli.cli.reports import Reports

    paths = {name: tmp_path / f"old.{name}" for name in ("junit_xml", "plot", "save", "summary", "other")}
    for path in paths.values():
        path.write_text("previous run")
    Reports("hessian", {name: str(path) for name, path in paths.items()},
            {"junit_xml", "plot", "save", "summary"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.other", "old.summary"]


def test_previous_reports_are_removed_except_files_the_run_reads(tmp_path):
    from gradcli.cli.reports import _files_read

    old, read = tmp_path / "old.npz", tmp_path / "in.npz"
    old.write_bytes(b"x")
    read.write_bytes(b"x")
    params = {"set": (f"x=@{read}:x",), "save": str(read)}
    writing.remove_previous([str(old), str(read), str(tmp_path / "missing.xml")], keep=_files_read(params))
    assert not old.exists() and read.exists()


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs filled to its last byte (root only; else skipped: the
    file-size limit tests cover the same failures)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is None or done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mount / "previous.xml").write_text(PASSING)
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(filler, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(filler)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=10)


def test_a_full_disk_leaves_the_previous_file_whole_and_no_temporary(full_tmpfs):
    target = full_tmpfs / "previous.xml"
    data = b"<testsuites>" + b" " * 8192 + b"</testsuites>\n"
    with pytest.raises(OSError) as raised:
        writing.replace_file(str(target), lambda temp: writing.write_bytes(temp, data))
    assert raised.value.errno == 28  # ENOSPC
    assert target.read_text() == PASSING and temporaries(full_tmpfs) == []


def test_stdout_on_a_full_disk_is_an_error_and_cut_back(full_tmpfs):
    """write_all to a file on the full disk: ENOSPC, and nothing of the partial
    report stays after what the file held before."""
    out = full_tmpfs / "previous.xml"
    with open(out, "a", encoding="utf-8") as stream:
        with pytest.raises(OSError) as raised:
            writing.write_all(stream, "{" + " " * 100_000 + "}\n")
    assert raised.value.errno == 28 and out.read_text() == PASSING


_CHILD = """
import sys
from gradcli.render import files, writing
try:
    writing.write_all(sys.stdout, "x" * 5000)
except OSError as exc:
    print("error", exc.errno, file=sys.stderr)
"""


def test_a_short_write_to_unbuffered_stdout_is_an_error_and_cut_back(tmp_path):
    """PYTHONUNBUFFERED: Python's own stdout drops the rest of a short write
    silently; write_all raises EFBIG and cuts the file back to where it began."""
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    with open(out, "a") as stdout:
        done = subprocess.run([sys.executable, "-c", _CHILD], stdout=stdout, stderr=subprocess.PIPE,
                              text=True, preexec_fn=_limit_file_size, cwd=ROOT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)})
    assert done.stderr.split() == ["error", "27"], done.stderr  # EFBIG
    assert out.read_text() == "before\n"


def test_write_all_to_a_pipe_without_a_reader_raises():
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "w", closefd=True) as stream:
        with pytest.raises(BrokenPipeError):
            writing.write_all(stream, "report\n")


def test_interrupted_junit_report_never_reads_as_a_pass():
    """Every model finished before the interrupt: one error testcase still says so."""
    from gradcli.cli.reports import ReportError
    from gradcli.render.junit import report_bytes
    from gradcli.results import CheckResult

    root = ET.fromstring(report_bytes("check", CheckResult(models=[]), ReportError("interrupted", 130)))
    assert root.get("errors") == "1"
    assert root.find("./testsuite/testcase/error").get("type") == "interrupted"
    assert re.search(r"the run was interrupted", root.find("./testsuite/testcase/error").get("message"))


_SPECIAL_CHILD = """
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # reading /dev/full must not eat the machine
from gradcli.render import files, writing
from gradcli.results import CheckResult

class Arrays:
    def arrays(self):
        return {"y": np.arange(3.0)}

for name, write in [
    ("summary", lambda: files.summary("/dev/full", "check", CheckResult(models=[]))),
    ("junit", lambda: files.junit_xml("/dev/full", "check", CheckResult(models=[]))),
    ("save", lambda: files.save_npz(sys.argv[1], "forward", Arrays())),
]:
    try:
        write()
        print(name, "written", file=sys.stderr)
    except (OSError, MemoryError) as exc:
        print(name, getattr(exc, "errno", type(exc).__name__), file=sys.stderr)
files.summary("/dev/stdout", "check", CheckResult(models=[]))  # stdout is a pipe
"""


def test_a_special_file_that_refuses_a_report_fails_at_once(tmp_path):
    """/dev/full as --summary (which read it, zeros without end, before
    appending), --junit-xml and, through a link, --save (np.savez reports
    success on it): each writer raises ENOSPC at once. --summary /dev/stdout
    on a pipe writes the Markdown there (it read the pipe, waiting forever)."""
    link = tmp_path / "full.npz"
    link.symlink_to("/dev/full")
    done = subprocess.run([sys.executable, "-c", _SPECIAL_CHILD, str(link)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stderr.splitlines() == ["summary 28", "junit 28", "save 28"], done.stderr
    assert done.stdout == "## gradcli check: 0 of 0 models passed\n\n| model | verdict | pairs | time |\n|---|---|---|---|\n"


def test_every_report_option_on_dev_full_is_one_line_and_exit_3(tmp_path, monkeypatch):
    """The command line: the reports that cannot be written share one line
    (exit 3), and the run ends at once."""
    from tests.conftest import error_line, gradcli

    monkeypatch.chdir(tmp_path)
    Path("full.npz").symlink_to("/dev/full")
    run = gradcli("check", SQUARE, "--summary", "/dev/full", "--junit-xml", "/dev/full")
    assert run.exit_code == 3, run
    assert error_line(run) == ("Error: cannot write /dev/full: No space left on device; "
                               "cannot write /dev/full: No space left on device")
    run = gradcli("forward", SQUARE, "--save", "full.npz")
    assert run.exit_code == 3, run
    assert error_line(run) == "Error: cannot write full.npz: No space left on device"
