"""Output files: ``--save FILE.npz``, ``--junit-xml PATH``, ``--plot FILE.png``
and ``--summary PATH``.

The command layer checks every output path before any model runs
(``gradcli.cli.options.OutputPath``) and calls the writer named by the option
once the result exists. Each writer takes ``(path, command, result)`` and
returns a line for stderr (or ""); ``--junit-xml`` also takes ``error`` so a
run that could not finish still leaves its report.
"""

from __future__ import annotations


def save_npz(path: str, command: str, result) -> str:
    """The result's arrays, keyed by name, for ``@FILE.npz:KEY``."""
    import numpy as np

    arrays = result.arrays()
    np.savez(path, **arrays)
    noun = "array" if len(arrays) == 1 else "arrays"
    return f"saved {len(arrays)} {noun} to {path} (keys: {', '.join(arrays) or 'none'})"


def junit_xml(path: str, command: str, result=None, error=None, model: str = "") -> str:
    from gradcli.render.junit import write_report

    write_report(path, command, result, error, model)
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
    return getattr(importlib.import_module(module), name)(result, path) or ""


def summary(path: str, command: str, result) -> str:
    """``--summary PATH``: the Markdown report, appended (``$GITHUB_STEP_SUMMARY``)."""
    from gradcli.render.github import summary_markdown

    with open(path, "a", encoding="utf-8") as f:
        f.write(summary_markdown(result))
    return ""


WRITERS = {"save": save_npz, "junit_xml": junit_xml, "plot": plot, "summary": summary}
#: Writers that still have something to say when the command could not run.
ON_ERROR = ("junit_xml",)
