"""``gradcli check --format github`` and ``--summary PATH``. Reads ``CheckResult`` only.

``--format github`` prints the plain report, then GitHub Actions workflow
commands, which the runner turns into annotations on the pull request:

* ``::error file=MODEL,title=...::...`` for every failing pair, at the model file;
* the same at the culprit's line: the ``tf.custom_gradient`` definition when
  there is one, else the op that was found wrong (``Culprit``), or for a pair
  cut by an op (``zero``, ``disconnected``) the first graph site with a line;
* ``::error`` for a model that could not be checked (at the line its error
  names, if any), or for a run that could not start (``error_annotation``), and ``::warning`` for a
  pair that passed with a verdict other than ``pass`` (a kink, a zero gradient),
  at the line of the graph site that cuts or bends the path when one has a line.

Every ``file=`` is written by one rule (``repository_path``): relative to the
checkout (``GITHUB_WORKSPACE``, else the repository holding the working
directory, else the working directory), with ``/`` separators, so the
annotation lands on the file in the diff whatever folder gradcli ran from. A
message keeps every line: newlines are encoded (``%0A``), never cut.

``--summary PATH`` appends a Markdown report (the verdict tables) to PATH, as
GitHub's ``$GITHUB_STEP_SUMMARY`` file expects (several steps may write to it).
Models that passed are folded (``<details>``): the failures are what the
reader opens the summary for.
An interrupted run appends the models it finished under a heading that says
so; the models it did not finish are rows marked ``not finished``.
"""

from __future__ import annotations

import os

from gradcli.model.paths import split_spec
from gradcli.results import PASS, CheckResult, ModelResult, PairResult
from gradcli.render.formatting import fmt, plural, printable, where
from gradcli.render.text import model_verdict, render_check

TITLE = "gradcli check"


def render_github(result: CheckResult, out, quiet: bool = False, verbosity: int = 0,
                  interrupted: bool = False) -> None:
    """The text report, then one workflow command per line."""
    render_check(result, out, quiet=quiet, verbosity=verbosity, interrupted=interrupted)
    for line in annotations(result):
        out.out(line, highlight=False)


def annotations(result: CheckResult) -> list[str]:
    lines = []
    for model in result.models:
        path = _file(model)
        if model.error is not None:
            # Load errors start "file:line: ..." when they know where (a syntax error).
            at = _location(model.error.partition(": ")[0])
            file, line = at if at is not None else (path, None)
            lines.append(command("error", printable(model.error), file=file, line=line, title=f"{TITLE}: could not check"))
            continue
        if model.not_the_users_function:
            proof = model.call_proof
            lines.append(command(
                "error", proof.detail if proof.nondeterministic
                else f"the function checked is not the user's own: {proof.detail}",
                file=path, title=f"{TITLE}: " + ("nondeterministic gradient" if proof.nondeterministic
                                                 else "not the user's function"),
            ))
        for pair in model.pairs:
            if pair.failed:
                lines += _failure(model, pair, path)
            elif pair.verdict != PASS:
                lines.append(_warning(pair, path))
    return lines


def _warning(pair: PairResult, path: str) -> str:
    """A pair that passed with another verdict (zero, disconnected, kink): at
    the line of the op that cuts or bends the path when one is known, in the
    model file (the op's own file when the site lies in another one)."""
    message = f"{pair.input} -> {pair.output}: {pair.explanation}"
    file, line = path, None
    located = _culprit_line(pair)
    if located is not None:
        file, line, what = located
        if file != path:
            message += f" (in {printable(path)})"
    return command("warning", message, file=file, line=line, title=f"{TITLE}: {pair.verdict}")


def _failure(model: ModelResult, pair: PairResult, path: str) -> list[str]:
    message = f"{pair.input} -> {pair.output}: {pair.verdict}: {pair.explanation}"
    if pair.worst is not None and pair.n_failing:
        w = pair.worst
        message += f"; worst {where(w, pair)}: analytic {w.analytic:.7g}, numeric {w.numeric:.7g}"
    title = f"{TITLE}: {pair.verdict} {pair.input} -> {pair.output}"
    lines = [command("error", message, file=path, title=title)]
    located = _culprit_line(pair)
    if located is not None:
        file, line, what = located
        lines.append(command("error", f"{what} ({pair.input} -> {pair.output} of {printable(path)})",
                             file=file, line=line, title=title))
    return lines


def _culprit_line(pair: PairResult) -> tuple[str, int, str] | None:
    """(file, line, what) of the code to blame, or None when nothing has a line."""
    culprit = pair.culprit
    if culprit is not None:
        what = (
            f"culprit: {culprit.site.description}: its gradient gives {culprit.analytic:.7g} for a "
            f"random probe, finite differences {culprit.numeric:.7g} (rel err {fmt(culprit.rel_error)})"
        )
        for location in (culprit.definition, culprit.site.location):
            parsed = _location(location)
            if parsed is not None:
                return (*parsed, what)
    for site in pair.sites:
        parsed = _location(site.location)
        if parsed is not None:
            return (*parsed, site.description or f"{site.op_type} '{site.op_name}'")
    return None


def _location(text: str) -> tuple[str, int] | None:
    """``"file:line"`` -> (``repository_path`` of file, line)."""
    file, _, line = (text or "").rpartition(":")
    if not file or not line.isdigit():
        return None
    return repository_path(file), int(line)


def _file(model: ModelResult) -> str:
    return repository_path(split_spec(model.path)[0])


def repository_path(path: str) -> str:
    """``path`` relative to the checkout, ``/``-separated: the folder in
    ``GITHUB_WORKSPACE``, else the repository (``.git``) holding the working
    directory, else the working directory. A path outside it stays absolute."""
    from gradcli.model.project import repository_root

    base = os.environ.get("GITHUB_WORKSPACE") or repository_root(os.getcwd()) or os.getcwd()
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(os.path.realpath(absolute), os.path.realpath(base))
    except ValueError:  # another drive
        return absolute.replace(os.sep, "/")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return absolute.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def command(kind: str, message: str, *, title: str, file: str | None = None, line: int | None = None) -> str:
    """``::error file=F,line=N,title=T::message`` with GitHub's escaping: ``%``,
    CR and LF in the message; also ``:`` and ``,`` in the properties."""
    props = [f"file={_escape(file, True)}"] if file else []
    if line is not None:
        props.append(f"line={line}")
    props.append(f"title={_escape(title, True)}")
    return f"::{kind} {','.join(props)}::{_escape(message, False)}"


def _escape(text: str, prop: bool) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def error_annotation(command_name: str, message: str) -> str:
    """The annotation of a run that could not start or finish (exit 2 or 3)."""
    return command("error", message, title=f"gradcli {command_name}")


# --- the job summary (Markdown) --------------------------------------------------


def summary_markdown(result: CheckResult, interrupted: bool = False) -> str:
    """A heading, the batch table, then each model's verdict table
    (``interrupted``: the run stopped before the models in ``skipped``)."""
    passed = sum(m.ok for m in result.models)
    heading = f"## {TITLE}: {passed} of {plural(len(result.models), 'model')} passed"
    if interrupted:
        total = len(result.models) + len(result.skipped)
        heading = f"## {TITLE}: interrupted after {len(result.models)} of {total} models ({passed} passed)"
    not_run = "**not finished**" if interrupted else "not run"
    lines = [heading, ""]
    lines += _table(
        ("model", "verdict", "pairs", "time"),
        [(_code(m.name), model_verdict(m), str(len(m.pairs)), f"{m.seconds:.2f} s") for m in result.models]
        + [(_code(name), not_run, "-", "-") for name in result.skipped],
    )
    for model in result.models:
        if model.ok:  # folded: opened only by a reader who wants to see it
            lines += ["", f"<details><summary><code>{_html(model.name)}</code>: {model_verdict(model)}</summary>", ""]
            lines += _table(_HEADER, [_row(p) for p in model.pairs])
            lines += ["", "</details>"]
            continue
        lines += ["", f"### {_code(model.name)}", ""]
        if model.error is not None:
            lines.append(f"error: {_cell(model.error)}")
            continue
        lines += _table(_HEADER, [_row(p) for p in model.pairs])
        lines.append("")
        for pair in model.pairs:
            if pair.failed:
                lines.append(f"- **{pair.verdict}** {_cell(pair.input)} -> {_cell(pair.output)}: {_cell(pair.explanation)}")
                located = _culprit_line(pair)
                if located is not None:
                    lines.append(f"  - at {_code(f'{located[0]}:{located[1]}')}: {_cell(located[2])}")
    return "\n".join(lines) + "\n"


_HEADER = ("input", "output", "verdict", "max abs err", "max rel err", "worst (error / allowed)", "analytic", "numeric")


def _html(text: str) -> str:
    import html

    return html.escape(printable(text))


def _row(pair: PairResult) -> tuple:
    worst = pair.worst
    verdict = f"**{pair.verdict}**" if pair.failed else pair.verdict
    return (
        _cell(pair.input), _cell(pair.output), verdict, fmt(pair.max_abs_error), fmt(pair.max_rel_error),
        _cell(where(worst, pair)) if worst else "-",
        f"{worst.analytic:.7g}" if worst else "-",
        f"{worst.numeric:.7g}" if worst else "-",
    )


def _table(header, rows) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _cell(text: str) -> str:
    """Markdown table cells end at ``|`` and at a newline (``printable`` spells it ``\\n``)."""
    return printable(text).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"

