"""Import TensorFlow without its C++ start-up chatter on stderr.

TensorFlow and absl print log lines (CUDA probing, oneDNN notices) from C++
while importing, which TF_CPP_MIN_LOG_LEVEL does not fully silence. gradcli
keeps stderr for its own messages, so file descriptor 2 points at /dev/null for
the duration of the import only. A Python exception raised by the import still
reaches the caller.

Keras imports ``matplotlib.pyplot`` when it is installed (for one plotting
helper), which costs every process a quarter of a second or more, and builds
matplotlib's font cache (``keep_out_of_home`` gives that cache a fresh folder,
so it is rebuilt at every start). gradcli draws with pyplot only under
``--plot``, and a model hardly ever does. So while TensorFlow is imported,
pyplot is found as usual but loaded lazily (``importlib.util.LazyLoader``): it
runs the first time anything reads an attribute of it (Keras' helper, a
model, ``--plot``), exactly as it would have at import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

def keep_out_of_home() -> None:
    """A run of the command line leaves nothing in the user's home. Importing
    Keras writes ``~/.keras/keras.json`` when it is not there, and the
    matplotlib it imports writes a font cache in ``~/.cache/matplotlib`` (and
    makes ``~/.config/matplotlib``). Each of ``KERAS_HOME`` and ``MPLCONFIGDIR``
    that is not set, and whose folder in the home does not exist yet (when it
    does, it is the user's, read as it is), points at a private temporary
    folder removed when the process ends. Set in the environment, they hold
    for the worker processes too. The command layer calls this before it runs
    a command; the Python API leaves the caller's process as it is."""
    home = os.path.expanduser("~")
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    wanted = [  # (variable, the module that reads it, the user's own folders)
        ("KERAS_HOME", "keras", [os.path.join(home, ".keras", "keras.json")]),
        ("MPLCONFIGDIR", "matplotlib", [os.path.join(config, "matplotlib"), os.path.join(cache, "matplotlib")]),
    ]
    private = [
        (variable, module) for variable, module, theirs in wanted
        if variable not in os.environ and module not in sys.modules
        and not any(os.path.exists(path) for path in theirs)
    ]
    if not private:
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="gradcli-settings-")
    atexit.register(shutil.rmtree, folder, True)
    for variable, name in private:
        os.environ[variable] = os.path.join(folder, name)
        os.mkdir(os.environ[variable])


class LazyPyplot(importlib.abc.MetaPathFinder):
    """Finds ``matplotlib.pyplot`` as Python's own path finder does, with its
    loader wrapped in ``LazyLoader``: the module is made and registered at
    import, and runs at its first attribute access (the module docstring).
    Installed only while TensorFlow is imported."""

    LAZY = "matplotlib.pyplot"

    def find_spec(self, name, path, target=None):
        if name != self.LAZY:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def import_tensorflow():
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded use): import as is
        import tensorflow

        return tensorflow
    devnull = os.open(os.devnull, os.O_WRONLY)
    deferred = LazyPyplot()
    sys.meta_path.insert(0, deferred)
    try:
        os.dup2(devnull, 2)
        import tensorflow
        import keras  # noqa: F401 - its import logs too
    finally:
        sys.meta_path.remove(deferred)
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    # Retracing warnings are expected: each model and input gets its own traces.
    tensorflow.get_logger().setLevel("ERROR")
    return tensorflow
