"""Output files: ``--save FILE.npz``, ``--junit-xml PATH``, ``--plot FILE.png``
and ``--summary PATH``; and the report on stdout.

The command layer checks every output path before any model runs
(``gradcli.cli.options.OutputPath``) and calls the writer named by the option
once the result exists. Each writer takes ``(path, command, result)`` and
returns a line for stderr (or ""); ``--junit-xml`` and ``--summary`` also take
``error`` so a run that could not finish, or was interrupted, still leaves its
report.

How a report file is written (whole or not at all, no stale report, every
byte accounted for) is ``gradcli.render.writing``'s rule.
"""

from __future__ import annotations

from gradcli.render.writing import exists_but_not_regular, write_bytes, replace_file

#: Report options whose target is removed when a run starts (``--summary``
#: appends, so it is not among them).
REPLACED = ("save", "junit_xml", "plot")


def save_npz(path: str, command: str, result) -> str:
    """The result's arrays, keyed by name, for ``@FILE.npz:KEY``."""
    import numpy as np

    arrays = result.arrays()
    for name in arrays:
        check_member_name(name, path)
    replace_file(path, lambda temp: np.savez(temp, **arrays))
    noun = "array" if len(arrays) == 1 else "arrays"
    return f"saved {len(arrays)} {noun} to {path} (keys: {', '.join(arrays) or 'none'})"


def check_member_name(name: str, path: str) -> None:
    """A key of ``--save`` is the name of a member of the .npz (a zip file):
    output and input names may hold ``/`` (``OUTPUT/INPUT`` keys do), but a
    name that unzips outside the folder it is unzipped in (absolute, a ``..``
    part), with an empty or ``.`` part, a backslash or a NUL is refused: exit 2
    before anything is written."""
    from gradcli.errors import UsageError

    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name
            or any(part in ("", ".", "..") for part in parts)):
        raise UsageError(
            f"--save {path}: {name!r} cannot be the name of a member of a .npz file "
            "(an absolute path, or an empty, '.' or '..' part); rename that output or input"
        )


def junit_xml(path: str, command: str, result=None, error=None, model: str = "") -> str:
    from gradcli.render.junit import report_bytes

    data = report_bytes(command, result, error, model)
    replace_file(path, lambda temp: write_bytes(temp, data))
    return ""


#: ``--plot``: the drawing function of each command that has the option.
PLOTS = {
    "hessian": "gradcli.render.hessian_plot:save_plot",
    "check": "gradcli.render.plots:save_check_plot",
    "jacobian": "gradcli.render.plots:save_jacobian_plot",
}


def plot(path: str, command: str, result) -> str:
    import importlib

    module, _, name = PLOTS[command].partition(":")
    draw = getattr(importlib.import_module(module), name)
    return replace_file(path, lambda temp: draw(result, temp)) or ""


def summary(path: str, command: str, result=None, error=None) -> str:
    """``--summary PATH``: the Markdown report, appended (``$GITHUB_STEP_SUMMARY``):
    the file's earlier content, then this run's, replace the file together."""
    from gradcli.render.github import summary_markdown

    data = summary_markdown(result, interrupted=error is not None).encode("utf-8")
    before = b""
    if not exists_but_not_regular(path):  # /dev/full reads zeros forever, /dev/stdout waits
        try:
            with open(path, "rb") as f:
                before = f.read()
        except FileNotFoundError:
            pass
    replace_file(path, lambda temp: write_bytes(temp, before + data))
    return ""


WRITERS = {"save": save_npz, "junit_xml": junit_xml, "plot": plot, "summary": summary}
#: Writers that still have something to say when the command could not run.
ON_ERROR = ("junit_xml",)
#: Writers that report the finished part of an interrupted run (``error`` set).
ON_INTERRUPT = ("junit_xml", "summary")
