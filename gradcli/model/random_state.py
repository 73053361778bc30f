"""The caller's random streams, kept as they were across a Python API call.

Loading a model seeds every global stream (``loading.seed_everything``: numpy's
global ``RandomState``, ``random``, TensorFlow's global seed, Keras' seed and
its session, whose name counters it clears), so that a model file drawing
from them at import gets the same point in every run. In gradcli's own
process (the command line, a worker) that is what is wanted; called from a
user's program (``gradcli.check(...)`` in a notebook or a test), it would
re-seed the caller's streams and restart its Keras layer names. torch's
``gradcheck`` leaves the caller's RNG alone, and so does gradcli:
``callers_state`` saves each stream before the call and puts it back after,
whatever the call did or raised:

* ``random``: ``getstate`` / ``setstate``;
* numpy: ``np.random.get_state`` / ``set_state`` (the legacy global stream;
  ``np.random.default_rng()`` generators are the caller's own objects);
* TensorFlow's global seed and the generator of its op seeds (the eager
  context's ``_seed`` and ``_rng``), and the global ``tf.random.Generator``'s
  state if one exists; when TensorFlow was not imported before the call, the
  global seed is unset again, as in a fresh import;
* Keras: its global state (name counters, the seed and ``SeedGenerator`` of
  ``keras.random``, the dtype policy), which ``clear_session`` replaces: the
  caller's is put back, or a blank one when Keras was not imported before.

Private TensorFlow and Keras attributes are read where no public API exists;
a version that lacks them leaves that stream as the call left it.

TensorFlow's kernel cache. Setting TensorFlow's seed (and Keras'
``clear_session``) also clears the eager context's kernel cache, which is what
restarts a seeded stateful random op (``tf.random.uniform``): its state lives
in its cached kernel. Every kernel and function gradcli runs is then built
again, the larger part of a warm API call (bench/README.md, "A warm API
call"). A function given with its values through the API, which proves at
load that it runs no stateful op (``loading.needs_fresh_kernels``), computes
the same values whatever TensorFlow's and Keras' seeds are: loading then
seeds only Python's and numpy's streams and leaves TensorFlow's alone
(``KERNELS["reset"]`` stays False), and the restore does not set TensorFlow's
seed again unless the call changed it: the caller's seeded kernels go on
where they were, as if no call had been made.
"""

from __future__ import annotations

import contextlib
import random
import sys

import numpy as np


#: ``reset``: whether TensorFlow's seed was set (and its kernel cache cleared
#: with it) since the caller's state was saved (``callers_state``); outside a
#: call, always True
KERNELS = {"reset": True}


@contextlib.contextmanager
def callers_state():
    saved = _save()
    outer, KERNELS["reset"] = KERNELS["reset"], False
    try:
        yield
    finally:
        reset, KERNELS["reset"] = KERNELS["reset"], outer or KERNELS["reset"]
        _restore(saved, reset)


def _save() -> dict:
    saved = {"random": random.getstate(), "numpy": np.random.get_state()}
    if "tensorflow" in sys.modules:
        try:
            from tensorflow.python.eager import context
            from tensorflow.python.ops import stateful_random_ops

            ctx = context.context()
            generator = stateful_random_ops.global_generator
            saved["tensorflow"] = (
                ctx._seed, getattr(ctx, "_rng", None), generator,
                None if generator is None else generator.state.numpy().copy(),
            )
        except Exception:  # another TensorFlow: leave its seed as the call leaves it
            pass
    global_state = sys.modules.get("keras.src.backend.common.global_state")
    if global_state is not None:
        saved["keras"] = (global_state.GLOBAL_STATE_TRACKER, global_state.GLOBAL_SETTINGS_TRACKER)
    return saved


def _restore(saved: dict, reset: bool = True) -> None:
    random.setstate(saved["random"])
    np.random.set_state(saved["numpy"])
    if "tensorflow" in sys.modules:
        try:
            from tensorflow.python.eager import context
            from tensorflow.python.ops import stateful_random_ops

            seed, rng, generator, state = saved.get("tensorflow", (None, None, None, None))
            ctx = context.context()
            if reset or ctx._seed != seed:  # the call set it: put the caller's back
                ctx._set_global_seed(seed)  # also clears the kernels seeded by the call
            if rng is not None:
                ctx._rng = rng
            stateful_random_ops.global_generator = generator
            if generator is not None:
                generator.reset(state)
        except Exception:
            pass
    global_state = sys.modules.get("keras.src.backend.common.global_state")
    if global_state is not None:
        import threading

        trackers = saved.get("keras") or (threading.local(), threading.local())
        global_state.GLOBAL_STATE_TRACKER, global_state.GLOBAL_SETTINGS_TRACKER = trackers
