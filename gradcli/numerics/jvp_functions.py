"""TensorFlow's process-wide forward-mode functions: every op's JVP is computed
by a ``tf.function`` that ``forwardprop`` traces per op signature and keeps in
one cache for the whole process. ``kept()`` is how every forward-mode product
of gradcli meets that cache (``numerics.autodiff.forward_accumulator``): bounded
in size, and traced for relaxed shapes from the first op on."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def kept():
    """The cache bounded (``_bounded``), and shapes relaxed for the duration
    (``_relaxed_shapes``)."""
    _bounded()
    with _relaxed_shapes():
        yield


@contextlib.contextmanager
def _relaxed_shapes():
    """TensorFlow's forward mode from the first trace of each op as it runs past
    32 (``forwardprop._TRACE_COUNT_LIMIT``): an op's JVP function is traced for
    its exact shapes first and, met at another shape, once more for shapes
    relaxed to the dimensions that differ (``reduce_retracing``), rather than
    once per shape. The same ops compute each JVP (the verdict table over 339
    files came out unchanged); what changes is how often a JVP is traced and
    how long the cache a lookup scans grows. Measured on five check-heavy test modules in one
    process: 305 traces of JVP functions against 564, 67.4 s of CPU against 70.1 s.
    Restored on leaving (the process's own forward mode is its own)."""
    from tensorflow.python.eager import forwardprop

    limit = getattr(forwardprop, "_TRACE_COUNT_LIMIT", None)
    if limit is None:  # another TensorFlow: its own rule
        yield
        return
    forwardprop._TRACE_COUNT_LIMIT = 0
    try:
        yield
    finally:
        forwardprop._TRACE_COUNT_LIMIT = limit


#: Bound on TensorFlow's process-wide cache of forward-mode op functions, one
#: per op signature a JVP meets (35-56 for a 2-layer keras-hub transformer).
JVP_FUNCTIONS_MAX = 4096


def _bounded() -> None:
    """Empty that cache past ``JVP_FUNCTIONS_MAX``: a signature not in it is
    looked up by a scan of every entry, so a process that checks many models
    (a test suite, an API caller) paid more for each, while each entry emptied
    is traced again (about 24 ms) when next met. Eight test modules in one
    process: 152 s unbounded, 129 s at 256, 124 s at 1024, 114 s at 4096. The
    per-op trace counts go too (past 32 TensorFlow relaxes an op's shapes)."""
    from tensorflow.python.eager import forwardprop

    cache = getattr(forwardprop, "_jvp_function_cache", None)
    if cache is not None and len(cache) > JVP_FUNCTIONS_MAX:
        cache.clear()
        getattr(forwardprop, "_TRACE_COUNT", {}).clear()
