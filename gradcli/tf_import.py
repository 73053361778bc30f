"""Import TensorFlow without its C++ start-up chatter on stderr.

TensorFlow and absl print log lines (CUDA probing, oneDNN notices) from C++
while importing, which TF_CPP_MIN_LOG_LEVEL does not fully silence. gradcli
keeps stderr for its own messages, so file descriptor 2 points at /dev/null for
the duration of the import only. A Python exception raised by the import still
reaches the caller.
"""

from __future__ import annotations

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
    try:
        os.dup2(devnull, 2)
        import tensorflow
        import keras  # noqa: F401 - its import logs too
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    # Retracing warnings are expected: each model and input gets its own traces.
    tensorflow.get_logger().setLevel("ERROR")
    return tensorflow
