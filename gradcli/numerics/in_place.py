"""Evaluate a model at x + s e_i and x - s e_i for many i without copying x.

The full check needs f at two points per element. Building each point as a
copy of the input costs a write and a read of the whole input per evaluation,
so the check's memory traffic grows as n**2; at 43k parameters that traffic,
not the model's arithmetic, was most of the time (bench/README.md). Here one
traced ``tf.while_loop`` holds the input group in a variable and, per point,
writes x_i + s (or x_i - s), evaluates, and writes x_i back: one point an
iteration, so the loop's body holds one call of the model and the model is
traced once per loop. The model reads the variable without a copy, so an
evaluation costs the model's own arithmetic plus a few small ops.

How a group's loop runs (``InPlaceLoop``), each rule measured in
bench/README.md:

* Plain (TensorFlow's graph executor, its intra-op threads) to begin with.
* Compiled with XLA where it pays: XLA ran this loop about 2x faster (it fuses
  the small ops an evaluation is made of) but compiling costs about 0.6 s per
  group. Rule (``worth_compiling``): with ``jit_compile=None`` (the default)
  a float64 group compiles once the directions it still has to run are
  predicted, from a plain call timed after the one that traced (or, before
  that, from another group's plain loop on the same model), to take longer
  than XLA_PAYS_SECONDS. ``True`` compiles from the start, ``False`` never. A model
  XLA cannot compile stays plain.
* Compiled loops run on ``workers()`` threads at once, each with its own
  variable, splitting every chunk: an XLA program runs on the thread that
  calls it, so two threads use two cores (measured 1.8x on 2 cores). Plain
  loops gain nothing from threads (the executor already uses the intra-op
  threads), so they run on one. Checks that run at once in this process
  (``sharing_cores``: the joint check beside the layer pass) share the cores
  evenly: each compiled loop takes its share, not every core.
* Every call pads its directions to a fixed length and passes the count, so
  a loop is traced (and compiled) once per group, whatever the chunk lengths.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: Compile a float64 group with XLA (when ``jit_compile`` is None) once its
#: remaining directions are predicted to take longer than this, plain: XLA
#: halved the time per evaluation and compiling took about 0.6 s, so from about
#: 1.2 s on it pays; 2 s leaves room for models that compile slower.
XLA_PAYS_SECONDS = 2.0
#: Most threads a compiled group runs on (each holds a copy of the group).
MAX_WORKERS = 8


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """One pool of MAX_WORKERS threads per process, shared by every loop (a batch
    of checks in one worker process must not leave a pool per check behind)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="gradcli-differences")
    return _POOL


#: Checks of this process running at once, each on a thread of its own
#: (``sharing_cores``), and the lock that counts them.
_running = 1
_running_lock = threading.Lock()


@contextlib.contextmanager
def sharing_cores():
    """For the duration, one more check runs at once beside the others (the
    joint check on its thread beside the layer pass, ``analyses.check.model.beside``):
    ``workers()`` gives each its share of the cores.

    Why: a compiled loop on every core beside another check puts three busy
    threads on two cores. A ResNet-50's max pool, whose element-wise re-check
    is a compiled loop of 46k directions, took 5.3 s alone and 10.4 s beside
    the joint check. With the loops on one thread while the joint check runs
    (bench/README.md, twenty-fourth round): the ResNet-50 34.84 / 33.67 s
    against 34.60 / 35.23 s, with a wrong activation 35.60 / 36.94 s against
    38.02 / 37.54 s (alternating runs). Each direction is evaluated alone, so
    how many threads share a chunk never changes its values."""
    global _running
    with _running_lock:
        _running += 1
    try:
        yield
    finally:
        with _running_lock:
            _running -= 1


def workers() -> int:
    """Threads for compiled loops: this check's share of the cores this process
    may use (``sharing_cores``), or TensorFlow's intra-op thread count when it
    was set (a bench/ run limited to one thread gets one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    configured = tf.config.threading.get_intra_op_parallelism_threads()
    share = cores // _running
    return max(1, min(MAX_WORKERS, share, configured or cores))


class InPlaceLoop:
    """f(x + s e_i) and f(x - s e_i) for the flat indices i of one input group.

    ``evaluate(flat) -> {output: tensor}`` is the model as a function of the
    group's flat vector (other inputs fixed); ``flat`` the group at the point;
    ``shapes`` the output shapes (None if unknown); ``jit_compile`` as in
    ``FiniteDifferences`` (None: XLA where it pays, see the module docstring).
    """

    def __init__(
        self,
        evaluate: Callable,
        flat: np.ndarray,
        outputs: list[str],
        shapes: dict,
        jit_compile: bool | None,
        length: int,
    ):
        self.evaluate, self.flat, self.outputs, self.shapes = evaluate, flat, outputs, shapes
        self.length = length  # directions per call; shorter calls are padded
        self.policy = jit_compile
        self.compiled = jit_compile is True
        #: measured on plain calls after the first (which pays the trace)
        self.seconds_per_direction: float | None = None
        self._loops: dict[bool, Callable] = {}
        self._variables: list = []

    def __call__(
        self, part: np.ndarray, steps: np.ndarray, remaining: int = 0, measured: float | None = None
    ):
        """(up, down): dicts of ``[k, *output_shape]`` arrays for the k indices
        ``part`` and steps ``steps``. ``remaining``: directions the caller still
        has to run after this call (for the XLA rule). ``measured``: seconds per
        direction a plain loop of another group of the same model took; before
        this loop has timed itself it stands in, so a large group can compile
        from its first call instead of tracing a plain loop first."""
        if self.seconds_per_direction is None and not self._loops:
            self.seconds_per_direction = measured
            self.compiled = self.compiled or self.worth_compiling(remaining + len(part))
        at = self.flat[part]
        plus, minus = at + steps, at - steps  # the points a batch of copies would hold, bit for bit
        if self.compiled:
            try:
                return self._run(True, part, plus, minus, at)
            except Exception:  # XLA cannot compile this model: stay plain
                if self.policy is True:
                    raise
                self.compiled = False
        traced = False in self._loops
        started = time.perf_counter()
        result = self._run(False, part, plus, minus, at)
        if traced:  # the first call's time is mostly tracing: it does not predict the rest
            self.seconds_per_direction = (time.perf_counter() - started) / len(part)
        if self.worth_compiling(remaining):
            self.compiled = True
        return result

    def worth_compiling(self, remaining: int) -> bool:
        """The XLA rule (module docstring): default policy, float64, and the
        remaining directions predicted above XLA_PAYS_SECONDS."""
        return (
            self.policy is None
            and self.flat.dtype == np.float64
            and self.seconds_per_direction is not None
            and self.seconds_per_direction * remaining > XLA_PAYS_SECONDS
        )

    def _run(self, compiled: bool, part, plus, minus, at):
        count = workers() if compiled else 1
        while len(self._variables) < count:
            self._variables.append(tf.Variable(self.flat, trainable=False))
        pieces = [s for s in np.array_split(np.arange(len(part)), count) if len(s)]
        calls = [
            (self._variables[w], part[s], plus[s], minus[s], at[s]) for w, s in enumerate(pieces)
        ]
        if len(calls) == 1:
            results = [self._call(compiled, *calls[0])]
        else:
            pool = _pool()
            results = [f.result() for f in [pool.submit(self._call, compiled, *c) for c in calls]]
        join = lambda side: {  # noqa: E731
            o: np.concatenate([r[side][o] for r in results]) for o in self.outputs
        }
        return join(0), join(1)

    def _call(self, compiled, variable, part, plus, minus, at):
        """One loop call on ``variable``, its arguments padded to a multiple of
        ``length``: one shape, so one trace (and one XLA compilation). The loop
        takes the 2k points interleaved (x_i + s, then x_i - s, per direction)."""
        k = len(part)
        padded = -(-k // self.length) * self.length
        pad = lambda a: np.concatenate([a, np.repeat(a[-1:], padded - k)])  # noqa: E731
        twice = lambda a: np.repeat(pad(a), 2)  # noqa: E731
        points = np.stack([pad(plus), pad(minus)], axis=1).reshape(-1)
        values = self._loop(compiled)(
            variable, tf.constant(twice(part)), tf.constant(points), tf.constant(twice(at)),
            tf.constant(2 * k, tf.int32),
        )
        values = {o: np.asarray(v)[: 2 * k] for o, v in values.items()}
        return {o: v[0::2] for o, v in values.items()}, {o: v[1::2] for o, v in values.items()}

    def _loop(self, compiled: bool):
        if compiled not in self._loops:
            self._loops[compiled] = self._trace(compiled)
        return self._loops[compiled]

    def _trace(self, compiled: bool):
        evaluate, outputs, shapes = self.evaluate, self.outputs, dict(self.shapes)
        dtype = tf.as_dtype(self.flat.dtype)
        if compiled and any(shapes.get(o) is None for o in outputs):
            # XLA's arrays need their element shapes: one evaluation at the point.
            shapes = {o: v.shape for o, v in evaluate(tf.constant(self.flat)).items()}

        def loop(variable, where, points, at, count):
            # XLA needs arrays of a static size (the padded length; the unwritten
            # tail is zeros, cut off); the plain loop writes exactly ``count``.
            size = tf.shape(where)[0] if compiled else count

            # One point an iteration, so the body holds one call of the model:
            # one trace of it (and half the graph for XLA to compile), where a
            # body evaluating both points of a direction held two.
            def body(j, values):
                index = where[j : j + 1, None]
                variable.scatter_nd_update(index, points[j : j + 1])
                value = evaluate(variable.read_value())
                variable.scatter_nd_update(index, at[j : j + 1])
                return j + 1, {o: values[o].write(j, value[o]) for o in outputs}

            arrays = {
                o: tf.TensorArray(dtype, size=size, element_shape=shapes.get(o)) for o in outputs
            }
            _, values = tf.while_loop(lambda j, _: j < count, body, [0, arrays])
            return {o: a.stack() for o, a in values.items()}

        # The variable is an argument, not a capture, so every worker's variable
        # shares one trace (and one XLA compilation).
        return tf.function(loop, jit_compile=compiled or None, autograph=False, reduce_retracing=True)
