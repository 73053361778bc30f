"""The ``--set`` arguments that reproduce a point, and the ``.npz`` file that holds large ones.

A witness (the worst point of ``check --samples`` or ``--special``, the
Hessian sample that breaks an expectation) is a value for every input. Small
values are printed inline, ``--set NAME=[...]``; an input of more than
``INLINE_ELEMENTS`` elements is written to a file and printed as
``--set NAME=@FILE.npz:NAME``, which ``--set`` reads back (``@FILE.npz:KEY``):
a Hessian sample of a model with 273k parameters would otherwise print
megabytes of numbers.

The file is ``<model>.witness.npz`` in the working directory (``witness_path``:
the model file's stem, and the model's name for ``FILE.py:NAME``), written
whole or not at all (``gradcli.render.writing.replace_file``). Its arrays keep
the values exactly (the native dtype, every bit), as the inline JSON numbers
do (the shortest decimal that round-trips).
"""

from __future__ import annotations

import json
import os
import shlex

import numpy as np

#: An input with at most this many elements is printed inline: a short line
#: stays readable and copyable; a longer one goes to the file.
INLINE_ELEMENTS = 8
SUFFIX = ".witness.npz"


def witness_path(model_path: str) -> str:
    """``<stem>[.<name>].witness.npz`` in the working directory, for a model
    ``FILE.py``, ``FILE.py:NAME``, ``FILE.keras`` or a SavedModel folder."""
    from gradcli.model.paths import split_spec

    path, name = split_spec(model_path)
    stem = os.path.basename(os.path.normpath(path)) or "model"
    stem = os.path.splitext(stem)[0] or stem
    if name:
        stem += "." + name.replace(os.sep, "_").replace("/", "_")
    return stem + SUFFIX


def needs_file(values: dict) -> bool:
    return any(np.size(v) > INLINE_ELEMENTS for v in values.values())


def set_arguments(values: dict, model_path: str) -> list[str]:
    """``--set NAME=VALUE`` for each input, shell-quoted: inline when small,
    ``@FILE.npz:NAME`` (``witness_path``) when larger than INLINE_ELEMENTS."""
    file = witness_path(model_path)
    arguments = []
    for name, value in values.items():
        if np.size(value) > INLINE_ELEMENTS:
            text = f"{name}=@{file}:{name}"
        else:
            text = f"{name}={json.dumps(np.asarray(value).tolist(), separators=(',', ':'))}"
        arguments.append("--set " + shlex.quote(text))
    return arguments


def witnesses(command: str, result) -> list[tuple[str, dict]]:
    """``(model path, values)`` of every witness a result shows."""
    found = []
    for model in getattr(result, "models", ()) or ():
        sweep = getattr(model, "sweep", None)
        if sweep is not None and sweep.failed and sweep.worst is not None:
            found.append((model.path, sweep.worst.values))
    sampling = getattr(result, "sampling", None)
    if sampling is not None and sampling.worst is not None:
        found.append((result.path, sampling.worst.values))
    return found


def save_witnesses(command: str, result) -> list[str]:
    """Write the file of every witness too large to print inline; returns a
    line for stderr per file written."""
    from gradcli.render.writing import replace_file

    lines = []
    for path, values in witnesses(command, result):
        if not needs_file(values):
            continue
        target = witness_path(path)
        arrays = {name: np.asarray(value) for name, value in values.items()}
        replace_file(target, lambda temp, arrays=arrays: np.savez(temp, **arrays))
        lines.append(f"witness point written to {target} ({', '.join(arrays)})")
    return lines
