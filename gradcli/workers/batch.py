"""Check a batch of models, each model file in a supervised worker process.

A model file is arbitrary Python: it can end the interpreter (``os._exit``,
a segfault in a C extension, the kernel's OOM killer) while it is imported or
run. Checked in gradcli's own process, that ends the run with whatever exit
code the model chose (``os._exit(0)`` reads as "all passed") and loses every
other model's report. So the command line checks model files in worker
processes and the supervisor here turns a worker's death into that model's
error row (exit 3, "the model ended the process (exit code N)" or "(signal
SIGSEGV)"), starts a fresh worker for the models left, and so always returns
a ``CheckResult`` with every model, which the command layer writes as JSON and
JUnit like any other.

Workers are fresh interpreters (the ``spawn`` start method: forking a process
that has started TensorFlow's thread pools is unsafe). Each leads its own
session and process group and has a private temporary folder (TensorFlow's
autograph writes converted code there), removed with the worker. After each
model the worker ends the processes the model started and restores the state
it can; when something cannot be undone (a thread still running) it says so
and the supervisor replaces it (``gradcli.workers.isolation``). Ending a
worker ends its process group and every process below it. The supervisor itself
never imports TensorFlow, so isolating a single model costs one interpreter
start-up on top of TensorFlow's import (which the worker pays instead of the
main process): docs/isolation-and-memory.md has the numbers. ``jobs`` workers
run at once; each handles models one after another.

Ctrl-C: workers ignore SIGINT (the terminal sends it to the whole process
group) so none prints a traceback; the supervisor, interrupted, ends every
worker (SIGTERM, then SIGKILL after ``STOP_SECONDS``) before the interrupt
reaches the command line (exit 130). A worker whose supervisor is gone (killed
outright) notices within ``WATCH_SECONDS`` and exits, even mid-model.

The Python API (``gradcli.check``) checks in its own process unless
``jobs > 1``: a library caller passes module objects and expects its own
process to run them. ``GRADCLI_IN_PROCESS=1`` does the same for the command
line (the test suite uses it; dedicated tests run the real path).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass

from gradcli.errors import (
    EXIT_MODEL, GradcliError, ModelError, death_message, debugging, how_ended, internal_error_message,
)
from gradcli.options import UsageError
from gradcli.results import CheckResult, ModelResult
from gradcli.workers import isolation

#: Set to 1 to check model files in gradcli's own process (``--jobs 1`` only).
IN_PROCESS_VARIABLE = "GRADCLI_IN_PROCESS"
#: Seconds a worker gets to end after SIGTERM before it is killed: TensorFlow
#: exits at once on SIGTERM, so this only bounds a worker stuck in C code.
STOP_SECONDS = 2.0
#: How often a worker checks that its supervisor is still alive.
WATCH_SECONDS = 1.0
#: How long a worker may take to start a task (import its code: TensorFlow's
#: import is 4-6 s on a quiet 2-core machine, several times that on a busy one)
#: before ``--timeout`` stops it anyway: ``--timeout`` counts the model's own
#: time, from when its code is imported, so an import that hangs needs a limit
#: of its own.
START_SECONDS = 300.0


#: The index of a message that is a progress report, not an answer.
PROGRESS = -1
#: The index of the message a worker sends once it is set up, before it reads
#: a task: a worker that dies before it is a failure to start, not the model's.
READY = -2
#: The index of the message a worker sends once a task's code is imported, before
#: it runs: ``--timeout`` counts from there.
STARTED = -3


def isolation_default() -> bool:
    """Whether the command line checks model files in worker processes."""
    return os.environ.get(IN_PROCESS_VARIABLE, "") in ("", "0")


def check_batch(
    specs: list, options, *, fixed=(), fail_fast: bool = False, jobs: int = 1,
    progress=None, isolate: bool = False,
) -> CheckResult:
    """Load and check every model; a model that fails to load, raises or ends
    its process becomes an error row.

    ``fixed`` names the option fields given explicitly (command line, API
    keywords): a model file's ``check`` dict does not override them.
    ``fail_fast`` stops at the first model that is not ok; the rest are listed
    in ``CheckResult.skipped``. ``isolate`` (or ``jobs > 1``) checks model
    files in supervised workers (``supervise``: a model that ends its worker
    becomes an error row); module objects are always checked in this process.
    Results keep the order of ``specs``. ``progress(done, total, label)``, if
    given, is called before the first model and after each one (``label``:
    the model finished, or ``None``).
    """
    specs = list(specs)
    timeout = getattr(options, "timeout", None)
    if timeout is not None and not all(isinstance(s, str) for s in specs):
        raise UsageError(
            "applies to model files, which run in worker processes; a module or "
            "callable is checked in this process and cannot be stopped", param="timeout",
            bad_value=False,
        )
    # A timeout needs a worker to stop, so it runs model files supervised even
    # where the command line would not (GRADCLI_IN_PROCESS=1, the API).
    if (isolate or jobs > 1 or timeout is not None) and all(isinstance(s, str) for s in specs):
        outcomes = supervised(specs, options, tuple(fixed), jobs)
    else:
        from gradcli.analyses.check import check_spec  # imports TensorFlow

        outcomes = (check_spec(spec, options, fixed) for spec in specs)
    results = []
    if progress is not None:
        progress(0, len(specs), None)
    try:
        for result in outcomes:
            results.append(result)
            if progress is not None:
                progress(len(results), len(specs), result.name)
            if fail_fast and not result.ok:
                break
    except KeyboardInterrupt:  # the models that finished are still this run's report
        raise Interrupted(CheckResult(
            models=results, skipped=[display(s) for s in specs[len(results):]])) from None
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()  # ends the workers still running after --fail-fast or Ctrl-C
    return CheckResult(models=results, skipped=[display(s) for s in specs[len(results):]])


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a batch: ``result`` holds the models that finished (those
    not finished are its ``skipped``), for the reports an interrupted run writes."""

    def __init__(self, result: CheckResult):
        super().__init__()
        self.result = result


def display(spec) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "__name__", repr(spec))


def supervised(specs: list[str], options, fixed: tuple, jobs: int):
    """Each model's ``ModelResult``, in the order of ``specs``."""
    tasks = [("gradcli.analyses.check:check_spec", (spec, options, fixed)) for spec in specs]
    for index, outcome in supervise(tasks, jobs, timeout=options.timeout):
        if isinstance(outcome, Raised):  # check_spec re-raises under --debug; else gradcli's own failure
            if debugging():
                raise outcome.error
            outcome = WorkerLost(str(outcome.error), 0.0, outcome.error.exit_code)
        if isinstance(outcome, WorkerLost):
            name = specs[index]
            # A message naming a parameter (``{@timeout}``) keeps it as a
            # template: the command line spells it as the flag, the API as the
            # keyword (``gradcli.errors.spell_texts``).
            outcome = ModelResult(name=name, path=name, error=f"{name}: {outcome.message}",
                                  error_code=outcome.exit_code, seconds=outcome.seconds)
        yield outcome


def run_isolated(target: str, name: str, *args):
    """``target(*args)`` (``"module:function"``) for one model in a supervised
    worker, as ``check`` does for each model file: the other commands' one
    model. Its ``GradcliError`` is raised here; a worker that dies is a
    ``ModelError`` naming ``name``. With ``GRADCLI_IN_PROCESS=1``, runs here."""
    if not isolation_default():
        return resolve(target)(*args)
    outcomes = supervise([(target, args)], 1)
    try:
        [(_, outcome)] = list(outcomes)
    finally:
        outcomes.close()
    if isinstance(outcome, Raised):
        raise outcome.error
    if isinstance(outcome, WorkerLost):
        raise ModelError(f"{name}: {outcome.message}")  # its {@name} spelled where it is shown
    return outcome


@dataclass
class Raised:
    """A task that raised: its ``GradcliError`` (an unexpected exception
    becomes one, as the command line reports it: "internal error: ...")."""

    error: GradcliError


@dataclass
class WorkerLost:
    """A task whose worker ended before answering (or could not send its answer)."""

    #: "the model ended the process (exit code 0)", "... (signal SIGSEGV)"; a
    #: parameter it names is written ``{@name}`` (``gradcli.errors.GradcliError``).
    message: str
    seconds: float
    exit_code: int = EXIT_MODEL


def supervise(tasks: list[tuple[str, tuple]], jobs: int, timeout: float | None = None):
    """Run ``tasks`` (``("module:function", args)``) in up to ``jobs`` workers.

    Yields ``(index, result)`` in the order of ``tasks``; ``result`` is the
    function's return value, or a ``WorkerLost`` when the worker died first, or
    ran longer than ``timeout`` seconds and was stopped (a new worker takes the
    next task). Closing the generator ends the workers. The timeout counts the
    model's own time, from when the worker has imported the task's code
    (TensorFlow, for a model: its ``STARTED`` message); a worker that has not
    within ``START_SECONDS`` more is stopped too.
    With one worker, its ``gradcli.progress`` reports are relayed to this
    process's listener (the progress bar of long single-model work); several
    workers' stages would overwrite each other, so theirs are dropped.
    """
    from gradcli import progress

    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")
    pending = list(range(len(tasks)))[::-1]  # next task at the end
    running: dict = {}  # worker -> (task index, start time)
    idle: list = []
    done: dict = {}
    next_out = 0
    try:
        while next_out < len(tasks):
            while pending and len(running) < jobs:
                worker = _ready_worker(idle, context)
                index = pending.pop()
                worker.connection.send((index, *tasks[index]))
                worker.task_started = None
                running[worker] = (index, time.perf_counter())
            now = time.perf_counter()
            left = None if timeout is None else max(
                0.0, min(worker.deadline(started, timeout) for worker, (_, started) in running.items()) - now
            )
            ready = wait([w.connection for w in running] + [w.process.sentinel for w in running], left)
            if timeout is not None:
                for worker in list(running):
                    index, started = running[worker]
                    if worker.connection not in ready and time.perf_counter() >= worker.deadline(started, timeout):
                        running.pop(worker)
                        worker.stop()
                        message = (
                            f"the model did not finish within {timeout:g} s and was stopped ({{@timeout}})"
                            if worker.task_started is not None else
                            f"internal error: a worker process did not start within "
                            f"{START_SECONDS + timeout:g} s, before the model ran"
                        )
                        done[index] = WorkerLost(message, time.perf_counter() - started)
            for worker in list(running):
                if worker.connection not in ready and worker.process.sentinel not in ready:
                    continue
                reply = worker.receive()
                if reply is not None and reply[0] == READY:
                    worker.ready = True
                    continue
                if reply is not None and reply[0] == STARTED:
                    worker.task_started = time.perf_counter()
                    continue
                if reply is not None and reply[0] == PROGRESS:
                    if jobs == 1:
                        progress.report(*reply[1])
                    continue  # still running
                index, started = running.pop(worker)
                if reply is None:  # died: its pipe is closed with no answer
                    worker.process.join(STOP_SECONDS)
                    message = death_message(worker.process.exitcode)
                    if not worker.ready:  # before it could run the model
                        message = (f"internal error: a worker process ended while starting "
                                   f"({how_ended(worker.process.exitcode)}), before the model ran")
                    done[index] = WorkerLost(message, time.perf_counter() - started)
                    worker.stop()
                else:
                    done[index] = reply[1]
                    if len(reply) > 2 and reply[2]:  # the model left what cannot be undone
                        worker.stop()
                    else:
                        idle.append(worker)
            while next_out in done:
                yield next_out, done.pop(next_out)
                next_out += 1
    finally:
        for worker in [*running, *idle]:
            worker.stop()


def _ready_worker(idle: list, context) -> "_Worker":
    """An idle worker that is still alive, else a new one: a worker that ended
    between two models (nothing of the last model should be left to end it)
    must not be blamed on the next."""
    while idle:
        worker = idle.pop()
        if worker.process.is_alive():
            return worker
        worker.stop()
    return _Worker(context)


class _Worker:
    """One worker process, the supervisor's end of its pipe and the worker's
    temporary folder."""

    def __init__(self, context):
        import tempfile

        self.temporary = tempfile.mkdtemp(prefix="gradcli-worker-")
        self.ready = False  # set by its READY message
        self.task_started = None  # when its task's code was imported (STARTED)
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(child_end, self.temporary), daemon=True)
        with _sigint_ignored():  # the child inherits SIG_IGN until it installs its own
            self.process.start()
        child_end.close()

    def deadline(self, sent: float, timeout: float) -> float:
        """When a task sent at ``sent`` has had ``timeout`` seconds of its own:
        importing its code (TensorFlow) is not the model's time."""
        if self.task_started is None:
            return sent + START_SECONDS + timeout
        return self.task_started + timeout

    def receive(self):
        """The worker's next message, ``(index, answer, retire)``, ``(PROGRESS,
        event)``, ``(READY, None)`` or ``(STARTED, None)``, or None if it died
        without one."""
        try:
            if self.connection.poll():
                return self.connection.recv()
        except (EOFError, OSError):
            pass
        return None

    def stop(self) -> None:
        """End the worker, its process group and every process below it (listed
        before the worker ends: then they are orphans), and remove its folder."""
        self.connection.close()
        below = isolation.descendants(self.process.pid) if self.process.pid else []
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_SECONDS)
            if self.process.is_alive():
                self.process.kill()
        self.process.join(STOP_SECONDS)
        if self.process.pid:
            isolation.kill_group(self.process.pid)
        isolation.kill(below)
        shutil.rmtree(self.temporary, ignore_errors=True)


class _sigint_ignored:
    """SIGINT ignored while a worker starts, so the new interpreter inherits it
    ignored and cannot be interrupted before ``_serve`` runs (a traceback)."""

    def __enter__(self):
        try:
            self.saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: signals are not ours to change
            self.saved = None

    def __exit__(self, *exc):
        if self.saved is not None:
            signal.signal(signal.SIGINT, self.saved)


def resolve(target: str):
    """The function a ``"module:function"`` string names (imported on first use)."""
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _exit_with_supervisor(supervisor: int, temporary: str | None) -> None:
    """End this worker, even in the middle of a model, once the supervisor is
    gone (killed, or ended by SIGTERM without cleaning up): it is then
    re-parented, and nobody would read its answer. The processes the model
    started and the worker's folder go with it."""
    import threading

    def watch():
        while os.getppid() == supervisor:
            time.sleep(WATCH_SECONDS)
        isolation.end_descendants()
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
        os._exit(EXIT_MODEL)

    threading.Thread(target=watch, daemon=True, name="gradcli-supervisor-watch").start()


def _serve(connection, temporary: str | None = None) -> None:
    """A worker: run tasks from the supervisor until it closes the pipe; its
    progress reports travel up the same pipe (``PROGRESS`` messages).

    Each answer is ``(index, result, retire)``: ``retire`` says why this worker
    must not take another model (``isolation.restore``), or is None. A failure
    of gradcli's own code here, outside the model, is answered as an internal
    error for the model at hand, never as a worker that died."""
    from gradcli import progress

    broken = None  # set-up failed: each task is answered with this internal error
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor handles Ctrl-C
        _set_up_worker(temporary)
    except Exception as exc:
        broken = internal_error_message(exc)
    try:
        connection.send((READY, None))
    except (OSError, ValueError):  # the supervisor is gone
        return
    saved = None
    while True:
        try:
            index, target, args = connection.recv()
        except (EOFError, OSError):  # the supervisor is gone
            return
        started = time.perf_counter()
        retire = None
        try:
            if broken:
                raise RuntimeError(broken)
            function = resolve(target)  # imports TensorFlow, before the state is saved
            connection.send((STARTED, None))  # the clock of --timeout starts here
            if saved is None:
                saved = isolation.snapshot()
            with progress.listening(lambda *event: connection.send((PROGRESS, event))):
                result = function(*args)
        except GradcliError as exc:
            result = Raised(exc)
        except (Exception, GeneratorExit) as exc:
            if debugging():
                traceback.print_exc()
            result = Raised(GradcliError(broken or internal_error_message(exc)))
        try:
            _flush_stdout()
            retire = "its set-up failed" if saved is None else _restore(saved)
        except Exception as exc:
            retire = f"restoring its state failed: {internal_error_message(exc)}"
        try:
            connection.send((index, result, retire))
        except Exception as exc:  # an answer that cannot be pickled: still one answer
            connection.send((index, Raised(GradcliError(internal_error_message(exc))), retire))


def _set_up_worker(temporary: str | None) -> None:
    """Own session and process group, temporary files in ``temporary``, the
    supervisor watched, and model output sent to stderr."""
    import tempfile

    isolation.lead_own_session()
    # A daemonic process may not start processes of its own (multiprocessing
    # refuses); a model may, since whatever it starts is ended with it.
    import multiprocessing

    multiprocessing.current_process()._config.pop("daemon", None)
    if temporary:
        tempfile.tempdir = temporary
        os.environ["TMPDIR"] = temporary  # and the model's own subprocesses
    _exit_with_supervisor(os.getppid(), temporary)
    _clean_up_on_sigterm(temporary)
    _flush_stdout()
    try:
        os.dup2(2, 1)  # model output (print, C code) goes to stderr, never into the report
    except OSError:  # no stderr either: the model's output goes nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


def _clean_up_on_sigterm(temporary: str | None) -> None:
    """On SIGTERM (the supervisor stopping this worker, or multiprocessing
    ending a daemonic child at its exit when nobody stopped the worker), end
    the processes the model started and remove the temporary folder, then end
    by SIGTERM as before."""

    def stop(number, frame):
        isolation.end_descendants()
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)


def _flush_stdout() -> None:
    """Flush what the model printed; a closed or missing stdout is not an error here."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        pass


def _restore(saved) -> str | None:
    return isolation.restore(saved)
