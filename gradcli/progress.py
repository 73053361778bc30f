"""Progress of long work inside one analysis. The library calls back; it never prints.

Loops that can run for a while (the chunks of finite differences, Lanczos
iterations, the points of region sampling) call ``report(stage, done, total,
detail)``; nothing happens unless a caller is listening::

    with gradcli.progress.listening(lambda stage, done, total, detail: ...):
        gradcli.check("model.py")

``total`` is None when the end is not known in advance (Lanczos stops when it
converges). A stage starts with ``done == 0`` and ends with ``done == total``.
The listener is held in a context variable, so the numerical code needs no
extra parameter and threads or tasks that did not ask for progress get none.
The command line's listener is ``gradcli.render.progress`` (a bar on a terminal).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

_listener: contextvars.ContextVar = contextvars.ContextVar("gradcli_progress", default=None)


def report(stage: str, done: int, total: int | None = None, detail: str = "") -> None:
    listener = _listener.get()
    if listener is not None:
        listener(stage, done, total, detail)


@contextmanager
def listening(listener):
    """Send ``report`` calls made inside the block to ``listener(stage, done, total, detail)``."""
    token = _listener.set(listener)
    try:
        yield listener
    finally:
        _listener.reset(token)
