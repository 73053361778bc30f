"""The helpers every report shares: numbers, names and notes as the reports
show them, the console they are drawn on, and plain text of a drawing. A leaf:
it imports no renderer."""

from __future__ import annotations

import os
import sys

from rich.console import Console

from gradcli.results import Element, PairResult

VERDICT_STYLES = {
    "pass": "green",
    "zero": "yellow",
    "disconnected": "yellow",
    "mismatch": "bold red",
    "inconclusive": "bold red",
    "kink": "yellow",
    "surrogate": "bold magenta",
}


#: Width of a report on a stream that is not a terminal (a CI log, a pipe, a
#: file) when COLUMNS does not say: wide, since a log has no right margin and a
#: table squeezed to 80 columns would split names and indices over lines.
LOG_WIDTH = 200

#: Notes that carry no decision for the user: they say how a run went when it
#: checked everything it was asked to (auto chose the full check; settings came
#: from the model file). They are shown with ``-v``; every other note (something
#: not checked, a cheaper path taken, a proof that could not be made) is shown
#: by default, and ``-q`` hides all notes.
ROUTINE_NOTES = ("auto ran the full check", "options from the model file's")


def console(file=None, color: bool | None = None) -> Console:
    """A console for ``file`` (stdout). ``color``: True or False forces colour
    on or off (``--color/--no-color``); None leaves it to the environment, as
    rich does: NO_COLOR turns colour off, FORCE_COLOR on, else a terminal gets
    colour and anything else none. A stream that is not a terminal gets a width
    of LOG_WIDTH unless COLUMNS says otherwise."""
    file = file or sys.stdout
    width = None
    if not (hasattr(file, "isatty") and file.isatty()) and "COLUMNS" not in os.environ:
        width = LOG_WIDTH
    extra = {}
    if color is False:
        extra = {"color_system": None, "force_terminal": False}
    elif color is True:
        extra = {"force_terminal": True, "no_color": False}
        if os.environ.get("TERM", "") in ("dumb", "unknown"):
            extra["color_system"] = "standard"
    return Console(file=file, width=width, highlight=False, soft_wrap=True, **extra)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 op``, ``2 ops``; ``many`` for irregular plurals (``1 of 1 ... passes``)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def shown_notes(notes, verbosity: int = 0) -> list[str]:
    """The notes a report shows at ``verbosity`` (-q: -1, default 0, -v: 1)."""
    if verbosity < 0:
        return []
    return [n for n in notes if verbosity > 0 or not n.startswith(ROUTINE_NOTES)]


def fmt(value: float) -> str:
    return f"{value:.3g}" if value != 0 else "0"


#: How ``printable`` spells the control characters that have a short escape.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` (a model file's name, a path in a location) on one line: each
    control character as its escape (a newline as ``\\n``, ESC as ``\\x1b``),
    so a file named with a newline cannot cut a report line, a Markdown
    bullet or a table row in two. Every format shows names through this."""
    import unicodedata

    return "".join(
        _ESCAPES.get(c, f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        if unicodedata.category(c) == "Cc" else c
        for c in str(text)
    )


def times_rms(ratio: float, table: bool = False) -> str:
    """A power relative to the RMS element: a percentage below it (``3.2% of``),
    a multiple above (``47.7 times``; ``47.7x`` in a table). A sparse gradient
    (a ``Rescaling`` layer's diagonal) has a small RMS element, and a
    percentage of it reads as nonsense (``4.77e+03%``)."""
    if ratio < 1:
        return f"{fmt(100 * ratio)}%" + ("" if table else " of")
    return f"{fmt(ratio)}x" if table else f"{fmt(ratio)} times"


def where(element: Element, pair: PairResult) -> str:
    if pair.mode == "fast" and not element.output_index and len(element.input_index) == 1:
        return f"probe {element.input_index[0]}"
    return f"{label(pair.output, element.output_index)} / {label(pair.input, element.input_index)}"


def label(name: str, index: list[int]) -> str:
    """``x[1, 2]``; a scalar is its bare name."""
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def plain_text(render, width: int = LOG_WIDTH) -> str:
    """What ``render(console)`` prints, as plain text (no colour, whatever the
    environment says): for JUnit reports and assertion messages."""
    import io

    buffer = io.StringIO()
    render(Console(file=buffer, width=width, color_system=None, force_terminal=False,
                   highlight=False, soft_wrap=True))
    return buffer.getvalue().rstrip("\n")
