"""A rich progress bar on stderr for batch runs; the library only calls back.

Shown only when stderr is a terminal (a CI log or a pipe gets no bar, whatever
FORCE_COLOR says), the run has more than one model, and the caller did not ask
for ``--json`` or ``--quiet``. The bar is transient: it disappears when the run
ends, so only the report stays. Colour follows NO_COLOR / FORCE_COLOR (rich).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager


def wanted(stream=None, *, enabled: bool = True, total: int = 2) -> bool:
    stream = stream or sys.stderr
    return enabled and total > 1 and hasattr(stream, "isatty") and stream.isatty()


@contextmanager
def progress_callback(*, enabled: bool = True, total: int = 2, stream=None):
    """Yields ``progress(done, total, label)`` for ``check_paths``, or None."""
    stream = stream or sys.stderr
    if not wanted(stream, enabled=enabled, total=total):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}", style="dim"),
        console=Console(file=stream), transient=True,
    )
    task = bar.add_task("", total=total)

    def progress(done: int, total: int, label: str | None) -> None:
        bar.update(task, completed=done, total=total, description=f"done: {label}" if label else "")

    with bar:
        yield progress
