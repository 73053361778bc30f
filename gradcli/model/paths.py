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
