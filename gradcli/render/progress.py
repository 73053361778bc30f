"""Progress on stderr; the library only calls back.

Two kinds of progress share one display: the models of a batch (``check_batch``
calls ``progress(done, total, label)``), and the stages of long work inside one
model that ``gradcli.progress.report`` announces (finite-difference passes,
each naming its inputs and which of the inputs it is, ``input 3 of 6``; Lanczos
iterations; region sampling; layers; a fast check's element-wise re-checks of its
failing inputs), each with elapsed and remaining time.

* On a terminal: a rich bar, transient (it disappears when the run ends, so
  only the report stays); the batch row only for more than one model.
* Elsewhere (a CI log, a pipe): plain lines, one when a stage has run
  ``LOG_AFTER`` seconds and then at most one every ``LOG_EVERY`` seconds, so a
  log shows that a long run is alive without filling up.

Both are driven by the reports and by a clock thread (``ticking``) that looks
at the running stages every ``TICK`` seconds: a stage that reports nothing for
a while (one long chunk, work counted in no steps such as loading a model,
``gradcli.progress.stage``) is still shown, and still gets a line in a log.

On a terminal a stage is shown once it has run ``SHOW_AFTER`` seconds, so
quick work never flickers. Its time left starts from the estimate below and is
smoothed (``TimeLeft``), so it does not jump with each chunk's pace. Nothing is shown with ``--json`` or ``-q``.

The estimate: once the first chunk of a full check's finite differences (every
element) has run, the stage's remaining time is known; when the whole pass is
predicted to take ``ESTIMATE_AFTER`` seconds or more, one line says so before
the wait, with the cheaper option (``--mode fast``), on a terminal and in a log.
Colour follows NO_COLOR / FORCE_COLOR (rich).
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

#: A stage is shown once it has run this long: a bar for work that ends sooner
#: would only flicker, a log line only add noise.
SHOW_AFTER = 2.0
#: Off a terminal, a stage prints its first line after this long (a log keeps
#: every line: only work long enough to make a reader wonder gets one), then at
#: most one line every LOG_EVERY seconds.
LOG_AFTER = 10.0
LOG_EVERY = 10.0
#: A full check's finite differences predicted to take this long or more are
#: announced, with the cheaper option, before the wait.
ESTIMATE_AFTER = 60.0
#: How often the clock thread looks at the running stages (``ticking``).
TICK = 1.0


def _terminal(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def wanted(stream=None, *, enabled: bool = True, total: int = 2) -> bool:
    """Whether the batch row is shown."""
    return enabled and total > 1 and _terminal(stream or sys.stderr)


@contextmanager
def progress_callback(*, enabled: bool = True, total: int = 2, stream=None):
    """Yields ``progress(done, total, label)`` for ``check_batch`` (None when
    no batch row is shown), and shows the stages reported inside the block."""
    stream = stream or sys.stderr
    if not enabled:
        yield None
        return
    if not _terminal(stream):
        from gradcli.progress import listening

        stages = LogStages(stream)
        with listening(stages), ticking(stages):
            yield None
        return
    from gradcli.progress import listening

    bar = progress_bar(stream)
    progress = None
    if total > 1:
        task = bar.add_task("", total=total, what="checking")
        left = TimeLeft()
        started = time.monotonic()

        def progress(done: int, total: int, label: str | None) -> None:
            now = time.monotonic()
            bar.update(task, completed=done, total=total, description=f"done: {label}" if label else "",
                       left=left(now - started, done, total, now))

    stages = Stages(bar)
    with bar, listening(stages), ticking(stages):
        yield progress


@contextmanager
def ticking(stages, every: float = TICK):
    """``stages.tick()`` every ``every`` seconds on a daemon thread for the
    duration: the running stages are looked at between their reports."""
    stop = threading.Event()

    def run():
        while not stop.wait(every):
            try:
                stages.tick()
            except Exception:  # noqa: BLE001 - progress is never worth an error
                pass

    thread = threading.Thread(target=run, name="gradcli-progress-clock", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def progress_bar(stream, clock=time.monotonic):
    """The rich bar: what, bar, done of total, elapsed, time left (``left_column``), detail."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.fields[what]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("left"), left_column(clock), TextColumn("{task.description}", style="dim"),
        console=Console(file=stream), transient=True, get_time=clock,
    )


#: Weight of the newest whole-stage rate in the smoothed one: the time left
#: follows a real change of pace within a few updates, not every chunk's noise.
SMOOTHING = 0.3


class TimeLeft:
    """The predicted end of a stage, for its row's time left.

    It starts from the estimate the report gives (``Estimate``: the first
    chunk's time times the chunks, elapsed * total / done), so the bar and the
    note agree; after that the rate (seconds per unit, over the whole stage so
    far) is smoothed exponentially (``SMOOTHING``). rich's own column divides
    by the speed of the last few updates, which jumps (4:22, 12:29, 5:17 in the
    first ten seconds of a 57 s pass). Between updates the time left counts
    down with the clock, to the time left after the step now running: a
    step that runs past the pace is not counted down to nothing
    (``left_column``, as a log line says it, ``time_left``)."""

    def __init__(self):
        self.rate: float | None = None

    def __call__(self, elapsed: float, done: int, total: int | None, now: float) -> tuple | None:
        """(the predicted end, on the clock of ``now``; the seconds left after
        the step now running), or None before the first chunk."""
        if not total or done <= 0:
            return None
        rate = elapsed / done
        self.rate = rate if self.rate is None else SMOOTHING * rate + (1 - SMOOTHING) * self.rate
        return now + self.rate * max(total - done, 0), self.rate * max(total - done - 1, 0)


def left_column(clock=time.monotonic):
    """A rich column: the time left to a row's predicted end (its ``left``
    field, ``TimeLeft``), as H:MM:SS; ``-:--:--`` before the first chunk.
    Once the step now running has run past the pace, the time left after
    it, marked ``+`` (and the running step)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class LeftColumn(ProgressColumn):
        def render(self, task):
            left = task.fields.get("left")
            if left is None:
                return Text("-:--:--", style="progress.remaining")
            ends, after = left
            remaining = ends - clock()
            seconds = int(max(remaining, after) + 0.5)
            return Text(f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
                        + ("+" if remaining < after else ""), style="progress.remaining")

    return LeftColumn()


class StageDisplay:
    """What both displays keep of the running stages, fed by the reports
    (``__call__``, the ``gradcli.progress`` listener) and by the clock thread
    (``tick``, ``ticking``), under one lock: when each started, its last
    report, and the end of each. A display says how a stage is shown
    (``show``), what it keeps per stage (``restarted``, ``remaining``) and what
    its end does (``ended``)."""

    def __init__(self, clock):
        self.clock = clock
        self.started: dict[str, float] = {}
        self.last: dict[str, tuple] = {}  # stage -> its last (done, total, detail, remaining)
        #: stage -> (done, the elapsed seconds when that count was reached): the
        #: pace of the steps done, which the step now running does not slow
        self.reached: dict[str, tuple[int, float]] = {}
        self.lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int | None, detail: str = "") -> None:
        with self.lock:
            now = self.clock()
            if done == 0 or stage not in self.started:
                self.started[stage] = now
                self.restarted(stage)
            elapsed = now - self.started[stage]
            if self.reached.get(stage, (None,))[0] != done or done == 0:
                self.reached[stage] = (done, elapsed)
            self.estimate(stage, done, total, detail, elapsed)
            if total is not None and done >= total:
                self.ended(stage, elapsed, detail)
                self.started.pop(stage, None)
                self.last.pop(stage, None)
                self.reached.pop(stage, None)
                return
            self.last[stage] = (done, total, detail, self.remaining(stage, elapsed, done, total, now))
            self.show(stage, now)

    def tick(self) -> None:
        """``show`` every running stage, reports or not."""
        with self.lock:
            now = self.clock()
            for stage in list(self.started):
                self.show(stage, now)

    def restarted(self, stage: str) -> None:
        pass

    def remaining(self, stage: str, elapsed: float, done: int, total: int | None, now: float):
        return None

    def ended(self, stage: str, elapsed: float, detail: str) -> None:
        pass

    def show(self, stage: str, now: float) -> None:
        raise NotImplementedError


class Stages(StageDisplay):
    """On a terminal: one row per running stage, added once the stage has run
    ``SHOW_AFTER`` seconds (by a report or by ``tick``) and removed when it ends."""

    def __init__(self, bar, clock=time.monotonic):
        super().__init__(clock)
        self.bar = bar
        self.rows: dict[str, int] = {}
        self.left: dict[str, TimeLeft] = {}
        self.estimate = Estimate(lambda line: bar.console.print(line, highlight=False, markup=False))

    def restarted(self, stage: str) -> None:
        self.left[stage] = TimeLeft()

    def remaining(self, stage, elapsed, done, total, now):
        return self.left[stage](elapsed, done, total, now)

    def ended(self, stage: str, elapsed: float, detail: str) -> None:
        row = self.rows.pop(stage, None)
        if row is not None:
            self.bar.remove_task(row)
        self.left.pop(stage, None)

    def show(self, stage: str, now: float) -> None:
        done, total, detail, left = self.last[stage]
        row = self.rows.get(stage)
        if row is None:
            if now - self.started[stage] < SHOW_AFTER:
                return
            row = self.rows[stage] = self.bar.add_task(detail, total=total, what=stage)
        self.bar.update(row, completed=done, total=total, description=detail, left=left)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Estimate:
    """Says once per stage, after its first chunk, that a full check's finite
    differences will take ESTIMATE_AFTER seconds or more, and the cheaper option."""

    def __init__(self, say):
        self.say = say
        self.told: set[str] = set()

    def __call__(self, stage, done, total, detail, elapsed) -> None:
        if not (total and 0 < done < total) or "every element" not in detail:
            return
        key = f"{stage}: {detail}"
        predicted = elapsed * total / done
        if key in self.told or predicted < ESTIMATE_AFTER:
            return
        self.told.add(key)
        self.say(
            f"note: {stage} for {detail} predicted to take about {_duration(predicted)} "
            f"({done} of {total} done in {elapsed:.1f} s); --mode fast checks random projections "
            "in a fraction of that (or --mode auto --budget SECONDS)"
        )


class LogStages(StageDisplay):
    """Off a terminal: plain lines on ``stream`` for stages that run LOG_AFTER
    seconds or more, at most one per LOG_EVERY, by a report or by ``tick``."""

    def __init__(self, stream, clock=time.monotonic):
        super().__init__(clock)
        self.stream = stream
        self.printed: dict[str, float] = {}
        self.estimate = Estimate(self.line)

    def line(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: progress is not worth an error
            pass

    def restarted(self, stage: str) -> None:
        self.printed.pop(stage, None)

    def ended(self, stage: str, elapsed: float, detail: str) -> None:
        if self.printed.pop(stage, None) is not None:  # announced: say that it ended
            self.line(f"progress: {stage}: done, {elapsed:.1f} s{_of(detail)}")

    def show(self, stage: str, now: float) -> None:
        """A line once the stage has run LOG_AFTER seconds, then at most one
        every LOG_EVERY: its count (none for work counted in no steps,
        ``gradcli.progress.stage``), elapsed and, once counted, time left
        (``time_left``)."""
        elapsed = now - self.started[stage]
        last = self.printed.get(stage)
        if elapsed < LOG_AFTER or (last is not None and now - last < LOG_EVERY):
            return
        done, total, detail, _ = self.last[stage]
        self.printed[stage] = now
        count = f"{done} of {total}, " if total else (f"{done}, " if done else "")
        left = time_left(done, total, self.reached[stage][1], elapsed) if total and done else ""
        self.line(f"progress: {stage}: {count}{elapsed:.1f} s{left}{_of(detail)}")


def time_left(done: int, total: int, reached: float, elapsed: float) -> str:
    """The time left of a counted stage, as a log line says it. Rule: the
    steps left take the pace of the steps done (``reached`` seconds for
    ``done``), counted down while the next one runs. A step that runs past
    that pace is said to, with the time left after it: its own length is
    not known (a failing layer re-checked element by element ran 70 s in a
    pass of 2 s layers, while a line that divided the elapsed time by the
    steps done said "about 73 s left" and growing, with 20 s left)."""
    pace, running = reached / done, elapsed - reached
    if running <= pace or done >= total:
        return f", about {_duration(max(pace * (total - done) - running, 0.0))} left"
    return (f", the running one {running:.0f} s so far, about {_duration(pace * (total - done - 1))} "
            "left after it")


def _of(detail: str) -> str:
    return f" ({detail})" if detail else ""
