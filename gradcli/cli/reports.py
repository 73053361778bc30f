"""Delivering a command's reports: stdout and the report files, checked, and
what an interrupted run leaves.

``GradcliCommand`` (``gradcli.cli.command``) opens a ``Reports`` for each
run once its options are read. What it guarantees:

* **Standard streams.** A closed stdout, stderr or stdin (``>&-``) is held
  open on /dev/null for the run, so no pipe or file of gradcli (a worker's
  pipe) takes its descriptor number. The report that should have gone to a
  closed stdout is an error: ``cannot write the report: stdout is closed``.
* **Every write is checked.** stdout gets the whole report or the run exits 3
  with one line, ``Error: cannot write the report: <reason>`` (a full disk,
  ``ulimit -f``, a pipe whose reader left as in ``| head -1``); a report file
  the same, ``Error: cannot write PATH: <reason>``. The other reports are still
  written; several failures share the one line. When stderr is gone too, only
  the exit code tells.
* **No stale report.** The report files a previous run left (``--junit-xml``,
  ``--plot``, ``--save``) are removed when the run starts, and each is written
  whole under a temporary name and renamed over its target
  (``gradcli.render.writing``): whatever ends the run, the target holds this
  run's report or nothing.
* **Interrupted runs.** Ctrl-C (SIGINT) and SIGTERM stop the run the same way
  (a KeyboardInterrupt): the workers are ended, and the reports are written
  for what finished (a batch's finished models: JSON with ``"error":
  "interrupted"``, JUnit with an error per unfinished model, the summary),
  marked as interrupted; then ``Error: interrupted`` (exit 130) or
  ``Error: terminated (SIGTERM)`` (exit 143). A second signal while the reports
  are written is ignored; SIGKILL cannot be handled, and leaves no report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import click

from gradcli.errors import EXIT_INTERRUPTED, EXIT_MODEL, GradcliError

#: Exit code after SIGTERM: 128 + the signal number, as shells report it.
EXIT_TERMINATED = 128 + signal.SIGTERM


class ReportError(GradcliError):
    """A run that could not deliver a report, or that was stopped: one line,
    and its own exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_MODEL):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):
        return ReportError, (str(self), self.exit_code)


def hold_standard_streams() -> None:
    """Open /dev/null on any of descriptors 0, 1, 2 that is closed, so the
    next file or pipe opened cannot take its number (a worker's pipe on fd 1
    would receive what is printed)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


class Reports:
    """The reports of one run of ``command``: stdout and the files in ``params``."""

    def __init__(self, command: str, params: dict, file_options):
        from gradcli.render.files import REPLACED
        from gradcli.render.writing import remove_previous

        self.command = command
        self.params = params
        self.failures: list[str] = []
        self.terminated = False
        hold_standard_streams()
        targets = [params[name] for name in REPLACED if name in file_options and params.get(name)]
        remove_previous(targets, keep=_files_read(params))

    # --- writing --------------------------------------------------------------

    def stdout(self, render) -> None:
        """Write ``render()`` (the whole report as text) to stdout, every byte."""
        from gradcli.render.writing import silence_stdout, write_all

        if any(f.startswith("cannot write the report") for f in self.failures):
            return
        try:
            write_all(sys.stdout, render() if sys.stdout is not None else "")
        except OSError as exc:
            self.failures.append(f"cannot write the report: {exc.strerror or exc}")
            silence_stdout()

    def file(self, name: str, write) -> None:
        """Run ``write()`` (a writer of ``gradcli.render.files``) for option ``name``."""
        try:
            note = write()
        except OSError as exc:
            self.failures.append(f"cannot write {self.params[name]}: {exc.strerror or exc}")
            return
        if note:
            _tell(note)

    def finish(self, error=None) -> None:
        """Raise the run's one error line: ``error``'s message (if the run
        already failed), then every report that could not be written."""
        if not self.failures:
            return
        lines = list(self.failures)
        code = EXIT_MODEL
        if error is not None:
            lines.insert(0, error.format_message() if hasattr(error, "format_message") else str(error))
            code = max(code, getattr(error, "exit_code", EXIT_MODEL))
        raise ReportError("; ".join(lines), code)

    # --- interruption ---------------------------------------------------------

    @contextlib.contextmanager
    def interruptible(self):
        """SIGTERM raises KeyboardInterrupt here, as Ctrl-C does (once: a second
        SIGTERM while the reports are written is ignored)."""

        def terminate(signum, frame):
            signal.signal(signal.SIGTERM, lambda *_: None)
            self.terminated = True
            raise KeyboardInterrupt

        try:
            saved = signal.signal(signal.SIGTERM, terminate)
        except ValueError:  # not the main thread: the caller's signals are not ours
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, saved)

    def stopped(self) -> ReportError:
        """The error an interrupted run ends with."""
        if self.terminated:
            return ReportError("terminated (SIGTERM)", EXIT_TERMINATED)
        return ReportError("interrupted", EXIT_INTERRUPTED)

    @contextlib.contextmanager
    def finishing(self):
        """While an interrupted run writes its reports, further Ctrl-C and
        SIGTERM wait (they would leave half of them)."""
        saved = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                saved[signum] = signal.signal(signum, signal.SIG_IGN)
            except ValueError:
                pass
        try:
            yield
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)


def _tell(line: str) -> None:
    """A note on stderr; a stderr that cannot be written loses only the note."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass


def _files_read(params: dict) -> list[str]:
    """Files the run reads as values (``--set x=@FILE.npz:KEY``): an output
    path among them is replaced at the end, never removed at the start."""
    files = []
    for value in params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, str) and "=@" in item:
                reference = item.partition("=@")[2]
                stem, colon, _key = reference.rpartition(":")
                files += [reference, stem] if colon else [reference]
    return [f for f in files if f]

