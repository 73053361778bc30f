"""A rich progress bar on stderr; the library only calls back.

Two kinds of progress share one bar: the models of a batch (``check_paths``
calls ``progress(done, total, label)``), and the stages of long work inside one
model that ``gradcli.progress.report`` announces (finite-difference chunks,
Lanczos iterations, region sampling), each with elapsed and remaining time.

Shown only when stderr is a terminal (a CI log or a pipe gets no bar, whatever
FORCE_COLOR says) and the caller did not ask for ``--json`` or ``--quiet``;
the batch row only for more than one model, a stage only once it has run for
``SHOW_AFTER`` seconds, so quick work never flickers. The bar is transient: it
disappears when the run ends, so only the report stays. Colour follows
NO_COLOR / FORCE_COLOR (rich).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

#: A stage gets a row once it has run this long: a bar for work that ends
#: sooner would only flicker.
SHOW_AFTER = 1.0


def _terminal(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def wanted(stream=None, *, enabled: bool = True, total: int = 2) -> bool:
    """Whether the batch row is shown."""
    return enabled and total > 1 and _terminal(stream or sys.stderr)


@contextmanager
def progress_callback(*, enabled: bool = True, total: int = 2, stream=None):
    """Yields ``progress(done, total, label)`` for ``check_paths`` (None when
    no batch row is shown), and shows the stages reported inside the block."""
    stream = stream or sys.stderr
    if not (enabled and _terminal(stream)):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
    )

    from gradcli.progress import listening

    bar = Progress(
        TextColumn("{task.fields[what]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.description}", style="dim"),
        console=Console(file=stream), transient=True,
    )
    progress = None
    if total > 1:
        task = bar.add_task("", total=total, what="checking")

        def progress(done: int, total: int, label: str | None) -> None:
            bar.update(task, completed=done, total=total, description=f"done: {label}" if label else "")

    with bar, listening(Stages(bar)):
        yield progress


class Stages:
    """``gradcli.progress`` listener: one row per running stage, added once the
    stage has run ``SHOW_AFTER`` seconds and removed when it ends."""

    def __init__(self, bar, clock=time.monotonic):
        self.bar, self.clock = bar, clock
        self.started: dict[str, float] = {}
        self.rows: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int | None, detail: str = "") -> None:
        now = self.clock()
        if done == 0 or stage not in self.started:
            self.started[stage] = now
        row = self.rows.get(stage)
        if total is not None and done >= total:  # the stage ended
            if row is not None:
                self.bar.remove_task(self.rows.pop(stage))
            self.started.pop(stage, None)
            return
        if row is None:
            if now - self.started[stage] < SHOW_AFTER:
                return
            row = self.rows[stage] = self.bar.add_task(detail, total=total, what=stage)
        self.bar.update(row, completed=done, total=total, description=detail)
