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
