"""Paths as messages show them."""

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


def expand_models(paths) -> list[str]:
    """Model arguments as files: a folder stands for the `*.py` files in it
    (sorted, leaving out `_private.py`), unless it is a SavedModel; an empty
    folder is a usage error."""
    from gradcli.model.savedmodel import is_saved_model

    specs = []
    for path in paths:
        if os.path.isdir(path) and not is_saved_model(path):
            found = sorted(
                os.path.join(path, f)
                for f in os.listdir(path)
                if f.endswith(".py") and not f.startswith("_")
            )
            if not found:
                raise UsageError(f"no *.py model files in folder {path}")
            specs.extend(found)
        else:
            specs.append(path)
    return specs


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
