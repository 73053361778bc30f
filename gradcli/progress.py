"""Progress of long work inside one analysis. The library calls back; it never prints.

Loops that can run for a while (the chunks of finite differences, Lanczos
iterations, the points of region sampling) call ``report(stage, done, total,
detail)``; nothing happens unless a caller is listening::

    with gradcli.progress.listening(lambda stage, done, total, detail: ...):
        gradcli.check("model.py")

``total`` is None when the end is not known in advance (Lanczos stops when it
converges). A stage starts with ``done == 0`` and ends with ``done == total``.
Work counted in no steps (loading a model, tracing it, the diagnosis) is a
``stage``: reported as it starts and as it ends, so a display can say how
long it has run in between.
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


@contextmanager
def stage(name: str, detail: str = ""):
    """Work counted in no steps, as one stage: ``report(name, 0, None, detail)``
    as it starts and ``report(name, 1, 1, detail)`` as it ends, raised or not."""
    report(name, 0, None, detail)
    try:
        yield
    finally:
        report(name, 1, 1, detail)
