"""Where a project begins: the folder that configuration, folder expansion and
model imports share.

The search (``find_pyproject``), as ruff and pytest find theirs: from a folder
upwards, the first ``pyproject.toml`` found ends the search, with or without a
``[tool.gradcli]`` table; so does the repository root (a folder holding
``.git``, a folder or a file), and so does a ``stop`` folder given by the
caller. ``gradcli.config`` reads the settings of the file it finds.

``project_folder`` names the project a model file belongs to, as pytest's
rootdir: the folder of that ``pyproject.toml``, else the repository root where
the search ended, else the working directory. It is put on ``sys.path`` while a
model file is imported (``importing.own_modules``), so ``from models.layers
import X`` works from ``models/net.py`` as it does in the project's own tests,
and the ``.gitignore`` files from it down are read when a folder is expanded
(``paths.collect_models``). Nothing here imports TensorFlow or reads a model.
"""

from __future__ import annotations

import os

PYPROJECT = "pyproject.toml"
#: A folder holding this (a folder, or a file in a worktree or submodule) is a
#: repository root: the search for a pyproject.toml ends there.
REPOSITORY_MARKER = ".git"


def repository_root(folder: str) -> str | None:
    """The nearest folder from ``folder`` upwards that holds ``.git``, or None."""
    folder = os.path.abspath(folder)
    while True:
        if os.path.lexists(os.path.join(folder, REPOSITORY_MARKER)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def find_pyproject(start: str | None = None, stop: str | None = None) -> tuple[str | None, str]:
    """``(path, boundary)``: the first pyproject.toml from ``start`` (the
    current folder) upwards, with or without a ``[tool.gradcli]`` table, or
    None; and the last folder searched. The search ends at the first
    pyproject.toml, at a repository root (a folder holding ``.git``), at
    ``stop`` and at the file system's root, whichever comes first."""
    folder = os.path.abspath(start or os.getcwd())
    stop = os.path.abspath(stop) if stop else None
    while True:
        candidate = os.path.join(folder, PYPROJECT)
        if os.path.isfile(candidate):
            return candidate, folder
        parent = os.path.dirname(folder)
        if folder == stop or parent == folder or os.path.lexists(os.path.join(folder, REPOSITORY_MARKER)):
            return None, folder
        folder = parent


def project_folder(start: str) -> str:
    """The project of the file or folder ``start``: the folder of the first
    ``pyproject.toml`` from it upwards, else the repository root that ended the
    search, else the working directory (absolute paths)."""
    start = os.path.abspath(start)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    path, boundary = find_pyproject(folder)
    if path is not None:
        return os.path.dirname(path)
    if os.path.lexists(os.path.join(boundary, REPOSITORY_MARKER)):
        return boundary
    return os.getcwd()
