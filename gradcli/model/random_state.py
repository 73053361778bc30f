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
call"). ``seed_streams`` seeds every stream as ``loading.seed_everything``
does without that clear, for a model that then proves it runs no stateful op
(``loading.needs_fresh_kernels``); ``reset_kernels`` clears the cache. The
restore clears it again only when the call did (``KERNELS``): otherwise the
call ran no kernel whose state a clear would reset, and the caller's seeded
kernels go on where they were, as if no call had been made.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading

import numpy as np


#: ``reset``: whether TensorFlow's kernel cache was cleared since the caller's
#: state was saved (``callers_state``); outside a call, always True
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


def reset_kernels() -> None:
    """Clear the eager context's kernel cache: a seeded stateful random op
    starts its sequence again (what ``tf.random.set_seed`` does besides seeding)."""
    from tensorflow.python.eager import context

    context.context().clear_kernel_cache()
    KERNELS["reset"] = True


def seed_streams(seed: int) -> bool:
    """Seed numpy, ``random``, TensorFlow and Keras as ``keras.backend.clear_session``
    and ``keras.utils.set_random_seed`` do, without clearing the kernel cache;
    False (nothing changed) when a private attribute this needs is missing."""
    try:
        from tensorflow.python.eager import context

        ctx = context.context()
        if not (hasattr(ctx, "_seed") and ctx.executing_eagerly()):
            return False
        keras_state = _keras_modules()
    except Exception:  # another TensorFlow or Keras: the seeding that clears
        return False
    import tensorflow as tf

    np.random.seed(seed)
    ctx._seed, ctx._rng = seed, random.Random(seed)  # tf.random.set_seed, less its cache clear
    if keras_state is not None:  # clear_session(free_memory=False), less its cache clear
        global_state, seed_generator, rng_utils = keras_state
        global_state.GLOBAL_STATE_TRACKER = threading.local()
        global_state.GLOBAL_SETTINGS_TRACKER = threading.local()
        tf.compat.v1.reset_default_graph()
        # keras.utils.set_random_seed, less TensorFlow's (set above)
        global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
        random.seed(seed)
        np.random.seed(seed)
    return True


def _generator(seed) -> random.Random:
    """The op-seed generator ``Context._set_global_seed`` makes for ``seed``."""
    try:
        hash(seed)
    except TypeError:
        seed = int(np.array(seed))
    return random.Random(seed)


def _keras_modules():
    """Keras' global state modules, None without Keras; raises when Keras lacks them."""
    try:
        import keras  # noqa: F401
    except Exception:  # no Keras: seed_everything skips it too
        return None
    from keras.src import backend
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    if backend.backend() != "tensorflow":
        raise RuntimeError("Keras runs another backend")
    for name in ("GLOBAL_STATE_TRACKER", "GLOBAL_SETTINGS_TRACKER", "set_global_attribute"):
        getattr(global_state, name)
    rng_utils.GLOBAL_RANDOM_SEED, seed_generator.GLOBAL_SEED_GENERATOR  # noqa: B018 - present
    return global_state, seed_generator, rng_utils


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
            if reset:
                ctx._set_global_seed(seed)  # also clears the kernels seeded by the call
            else:  # no kernel was reset, so no call's kernel holds a state to clear
                ctx._seed, ctx._rng = seed, _generator(seed)
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
