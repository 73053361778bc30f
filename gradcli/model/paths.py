"""Model paths: as messages show them, as arguments spell them, and folders expanded.

Numpy, os and pathlib only: no TensorFlow, no model loading.
"""

from __future__ import annotations

import os

from gradcli.errors import UsageError


def relative_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def split_spec(spec: str) -> tuple[str, str | None]:
    """``FILE.py:NAME`` -> (FILE.py, NAME); a plain path -> (path, None)."""
    if not os.path.exists(spec) and ":" in spec:
        path, entry = spec.rsplit(":", 1)
        if entry.isidentifier():
            return path, entry
    return spec, None

#: The file that makes a folder a SavedModel.
SAVED_MODEL_FILE = "saved_model.pb"


def is_saved_model(path: str) -> bool:
    """A folder holding ``saved_model.pb`` (no TensorFlow)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))


#: Files of a folder that are never model files: pytest's per-folder plugin.
NOT_MODELS = ("conftest.py",)


def expand_models(paths) -> list[str]:
    """Model arguments as files, each once, collected by one rule:

    * a folder stands for the ``*.py`` files in it (sorted), unless it is a
      SavedModel; it leaves out private files (``_helpers.py``), hidden ones
      and editor lock links (``.#name.py``), ``conftest.py``, and names that
      are not a readable file (dangling links, folders named ``x.py``); a folder
      with none is a usage error;
    * each path is spelled once, without ``.`` parts or doubled slashes
      (``./a.py`` is ``a.py``; ``..`` is kept, since a link before it may point
      elsewhere);
    * a file named twice (``a.py``, ``./a.py``, a link to it, the file inside
      its folder) is kept at its first mention, so it is checked once and lands
      in one shard. ``FILE.py:NAME`` entries of one file are distinct models.
    """
    specs, seen = [], set()
    for path in paths:
        if os.path.isdir(path) and not is_saved_model(path):
            found = sorted(
                os.path.join(path, f) for f in os.listdir(path) if _model_file(path, f)
            )
            if not found:
                raise UsageError(f"no *.py model files in folder {path}")
        else:
            found = [path]
        for spec in found:
            spec = spelled(spec)
            key = _identity(spec)
            if key not in seen:
                seen.add(key)
                specs.append(spec)
    return specs


def _model_file(folder: str, name: str) -> bool:
    return (
        name.endswith(".py") and not name.startswith(("_", ".")) and name not in NOT_MODELS
        and os.path.isfile(os.path.join(folder, name))
    )


def spelled(spec: str) -> str:
    """``spec`` without ``.`` parts, doubled or trailing slashes."""
    import pathlib

    path, entry = _split(spec)
    text = os.fspath(pathlib.PurePath(path)) if path else path
    return text if entry is None else f"{text}:{entry}"


def _identity(spec: str):
    """What makes two spellings one model: the real file and the entry name."""
    path, entry = _split(spec)
    return (os.path.realpath(path) if os.path.exists(path) else path, entry)


def _split(spec: str) -> tuple[str, str | None]:
    return split_spec(spec)


def shard_models(specs: list[str], index: int, count: int) -> list[str]:
    """Shard ``index`` of ``count`` (1-based) of a batch, for CI matrix jobs.

    The rule: sort the models by normalised path, then deal them round robin,
    shard k taking positions k-1, k-1+count, ... of the sorted list. Every model
    lands in exactly one shard whatever order the arguments came in, shard sizes
    differ by at most one, and no hash is involved, so a job's list can be
    predicted by reading the folder. The shard keeps the sorted order.
    """
    if not 1 <= index <= count:
        raise UsageError(f"must be K/N with 1 <= K <= N, got {index}/{count}", param="shard")
    ordered = sorted(specs, key=lambda spec: (os.path.normpath(spec), spec))
    return ordered[index - 1::count]
