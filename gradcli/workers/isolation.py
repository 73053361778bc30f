"""What a model leaves behind in a worker, and how the worker is cleaned
before the next model (``gradcli.workers.batch``).

Models of a batch run one after another in a worker process, so TensorFlow is
imported once per worker, not once per model. A model file is arbitrary Python
and can change its process for the models after it: a pending ``SIGALRM``, a
signal handler, ``np.seterr``, ``os.chdir``, a warnings filter, an environment
variable, a rebound ``np.sum``, a thread that calls ``os._exit`` later, a
subprocess that keeps running. The next model would get the blame. So after
every model the worker:

1. ends every process the model started (``end_descendants``): the worker
   leads its own session (``os.setsid``) and, on Linux, is a child subreaper,
   so even a double-forked daemon stays its descendant and is found in
   ``/proc``; each is killed (SIGKILL) and reaped;
2. restores what can be restored to the state it had before its first model
   (``snapshot`` / ``restore``): interval timers (a pending alarm) first, then
   signal handlers and the blocked-signal mask, the working directory, the
   environment, the umask, numpy's error handling and print options, warnings
   filters and ``showwarning``, ``sys.argv``, ``sys.path`` and the import
   hooks, a module replaced in ``sys.modules``, the standard streams, hooks,
   recursion limit, profile and trace functions, log levels, resource limits,
   the garbage collector's switches, ``faulthandler`` (and its pending
   ``dump_traceback_later``), TensorFlow's
   eager/XLA switches, Keras' floatx, epsilon and image format, and the
   public names of ``builtins``, ``math``, ``os``, ``time``, ``random``,
   numpy, TensorFlow's and Keras' API modules (a name the model rebound gets
   its object back; names it added stay);
3. asks to be replaced (``restore`` returns why) when something cannot be
   undone: a Python thread the model started is still running (a thread
   cannot be stopped and may end the process at any time), a process that
   survived SIGKILL, a lowered hard resource limit, or a restore step that
   failed. The supervisor then ends
   the worker (with its process group and every process below it) and starts
   a fresh one for the next model.

Cost (docs/isolation-and-memory.md has the measurement): the check after each
model takes a few hundredths of a second; a fresh worker per model would pay
TensorFlow's import for every model instead, about 3 s each.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time

#: Rounds of "kill every descendant, reap, look again" before the worker gives
#: up and asks to be replaced (a process forking as fast as it is killed).
KILL_ROUNDS = 20
#: Pause between rounds, for the killed processes to become zombies.
KILL_PAUSE = 0.01
#: Interval timers a model may leave running (``signal.alarm`` is ITIMER_REAL).
TIMERS = tuple(
    getattr(signal, name) for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
    if hasattr(signal, name)
)
#: Modules whose public names a model may rebind (``np.sum = ...``); their
#: objects are put back. Plus every module of TensorFlow's and Keras' public API.
SHARED_MODULES = ("builtins", "math", "os", "os.path", "time", "random", "numpy", "numpy.linalg",
                  "tensorflow", "keras")
_API_PREFIXES = ("tensorflow._api.", "keras.api.", "keras._tf_keras.")
#: Linux prctl option: orphaned descendants are re-parented to this process.
_PR_SET_CHILD_SUBREAPER = 36


# --- processes ----------------------------------------------------------------


def lead_own_session() -> None:
    """Make this process (a worker) the leader of a new session and process
    group, and on Linux a child subreaper, so everything a model starts is in
    its group and below it in the process tree."""
    try:
        os.setsid()
    except OSError:  # already a group leader
        pass
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _process_table() -> dict[int, tuple[int, str]] | None:
    """pid -> (parent pid, state letter) of every process, from /proc (None
    where there is no /proc)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    table = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # ended meanwhile
            continue
        fields = data[data.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
        if len(fields) > 1:
            table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def descendants(pid: int) -> list[int]:
    """Live (not zombie) processes below ``pid`` in the process tree."""
    table = _process_table()
    if not table:
        return []
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        if table[child][1] != "Z":
            found.append(child)
        todo.extend(children.get(child, ()))
    return found


def kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours
            pass


def kill_group(leader: int) -> None:
    """SIGKILL the process group ``leader`` led (a worker's), if it exists.
    Its id is not reused while any member is alive."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except OSError:
        pass


def _reap() -> None:
    """Collect this process's ended children (zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants() -> bool:
    """Kill every process below this one and reap them; False if some survive."""
    me = os.getpid()
    for _ in range(KILL_ROUNDS):
        left = descendants(me)
        if not left:
            _reap()
            return True
        kill(left)
        time.sleep(KILL_PAUSE)
        _reap()
    return not descendants(me)


# --- process state ------------------------------------------------------------


class Snapshot:
    """What ``restore`` puts back: taken once per worker, before its first model."""

    def __init__(self):
        import logging
        import warnings

        import numpy as np

        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.numpy_errors = np.geterr()
        self.numpy_call = np.geterrcall()
        self.numpy_print = np.get_printoptions()
        self.handlers = {}
        for number in signal.valid_signals():
            if number in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                handler = signal.getsignal(number)
            except (OSError, ValueError):
                continue
            if handler is not None:  # None: installed outside Python, cannot be put back
                self.handlers[number] = handler
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if hasattr(signal, "pthread_sigmask") else None
        self.warning_filters = list(warnings.filters)
        self.showwarning = warnings.showwarning
        self.sys = {name: getattr(sys, name) for name in (
            "argv", "stdin", "stdout", "stderr", "excepthook", "displayhook", "unraisablehook",
            "breakpointhook",
        )}
        self.import_lists = {name: list(getattr(sys, name)) for name in ("path", "meta_path", "path_hooks")}
        self.loaded = dict(sys.modules)
        self.threading_excepthook = threading.excepthook
        self.trace = (sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile())
        self.recursion_limit = sys.getrecursionlimit()
        self.switch_interval = sys.getswitchinterval()
        self.log_levels = {name: logging.getLogger(name or None).level for name in ("", "tensorflow")}
        self.logging_disabled = logging.root.manager.disable
        self.threads = {t.ident for t in threading.enumerate()}
        self.faulthandler = _faulthandler_enabled()
        self.gc = (gc.isenabled(), gc.get_threshold())
        self.limits = _limits()
        self.settings = [(setter, getter()) for getter, setter in _framework_settings()]
        self.modules = {
            name: dict(vars(module)) for name, module in list(sys.modules.items())
            if module is not None and (name in SHARED_MODULES or name.startswith(_API_PREFIXES))
        }


def _framework_settings():
    """(getter, setter) of TensorFlow and Keras switches that outlive a model."""
    pairs = []
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        pairs += [
            (tf.config.functions_run_eagerly, tf.config.run_functions_eagerly),
            (tf.config.optimizer.get_jit, tf.config.optimizer.set_jit),
            (tf.config.experimental.tensor_float_32_execution_enabled,
             tf.config.experimental.enable_tensor_float_32_execution),
        ]
    keras = sys.modules.get("keras")
    config = getattr(keras, "config", None)
    if config is not None:
        pairs += [(config.floatx, config.set_floatx), (config.epsilon, config.set_epsilon),
                  (config.image_data_format, config.set_image_data_format)]
    return pairs


def snapshot() -> Snapshot:
    return Snapshot()


def restore(saved: Snapshot) -> str | None:
    """Put the worker back as ``saved`` and end what the model started. Returns
    None when the worker can take the next model, else why it cannot (the
    supervisor replaces it)."""
    import faulthandler
    import logging
    import warnings

    import numpy as np

    for timer in TIMERS:  # first, so that no alarm fires while the rest is restored
        signal.setitimer(timer, 0)
    faulthandler.cancel_dump_traceback_later()  # its watchdog thread can end the process
    if faulthandler.is_enabled() != saved.faulthandler:
        faulthandler.enable() if saved.faulthandler else faulthandler.disable()
    if not _set_limits(saved.limits):
        return "a resource limit the model lowered cannot be raised again"
    if saved.mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, saved.mask)
    for number, handler in saved.handlers.items():
        if signal.getsignal(number) is not handler:
            signal.signal(number, handler)
    if not end_descendants():
        return "a process the model started could not be ended"
    os.chdir(saved.cwd)
    if os.environ != saved.environ:
        os.environ.clear()
        os.environ.update(saved.environ)
    os.umask(saved.umask)
    np.seterr(**saved.numpy_errors)
    np.seterrcall(saved.numpy_call)
    np.set_printoptions(**saved.numpy_print)
    warnings.filters[:] = saved.warning_filters
    warnings._filters_mutated()
    warnings.showwarning = saved.showwarning
    for name, value in saved.sys.items():
        setattr(sys, name, value)
    for name, items in saved.import_lists.items():
        getattr(sys, name)[:] = items
    for name, module in saved.loaded.items():  # a module replaced in sys.modules comes back
        if sys.modules.get(name, module) is not module:
            sys.modules[name] = module
    for name in [n for n, m in sys.modules.items() if m is None and n not in saved.loaded]:
        del sys.modules[name]  # a None entry blocks the import of that name for the next model
    threading.excepthook = saved.threading_excepthook
    sys.setrecursionlimit(saved.recursion_limit)
    sys.setswitchinterval(saved.switch_interval)
    trace, profile, thread_trace, thread_profile = saved.trace
    if (sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile()) != saved.trace:
        sys.settrace(trace)
        sys.setprofile(profile)
        threading.settrace(thread_trace)
        threading.setprofile(thread_profile)
    for name, level in saved.log_levels.items():
        logging.getLogger(name or None).setLevel(level)
    logging.disable(saved.logging_disabled)
    for setter, value in saved.settings:
        setter(value)
    enabled, threshold = saved.gc
    gc.enable() if enabled else gc.disable()
    gc.set_threshold(*threshold)
    for name, names in saved.modules.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        now = vars(module)
        for key, value in names.items():
            if now.get(key, _MISSING) is not value:
                now[key] = value
    stray = _stray_threads(saved)
    if stray:
        return f"the model left {len(stray)} thread(s) running ({', '.join(sorted(stray))})"
    return None


_MISSING = object()


def _faulthandler_enabled() -> bool:
    import faulthandler

    return faulthandler.is_enabled()


def _limits() -> dict:
    """Resource limits (CPU time, memory, open files...): a lowered CPU limit
    would end a later model with SIGXCPU."""
    try:
        import resource
    except ImportError:  # not Unix
        return {}
    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            try:
                limits[getattr(resource, name)] = resource.getrlimit(getattr(resource, name))
            except (OSError, ValueError):
                pass
    return limits


def _set_limits(saved: dict) -> bool:
    """Put the limits back; False when one cannot be (a hard limit, once
    lowered, cannot be raised without privileges)."""
    if not saved:
        return True
    import resource

    for limit, value in saved.items():
        if resource.getrlimit(limit) != value:
            try:
                resource.setrlimit(limit, value)
            except (OSError, ValueError):
                return False
    return True


def _stray_threads(saved: Snapshot) -> list[str]:
    """Names of live threads started since the snapshot, other than gradcli's
    own pool of finite-difference threads (``gradcli.numerics.in_place``)."""
    in_place = sys.modules.get("gradcli.numerics.in_place")
    pool = getattr(in_place, "_POOL", None)
    ours = {t.ident for t in getattr(pool, "_threads", ())}
    return [
        t.name for t in threading.enumerate()
        if t.is_alive() and t.ident not in saved.threads and t.ident not in ours
    ]
