"""Human-readable output of ``forward``, ``vjp``, ``jvp`` and ``jacobian``.

Reads the result objects of ``gradcli.analyses.inspection`` only. Small arrays are printed
whole; larger ones as a summary (shape, min/max/mean/norm and the first
entries, saying how many of how many) - never a silent "...". Jacobian blocks
up to TABLE_ROWS x TABLE_COLUMNS are tables with a colour scale; larger ones
list their norms and largest entries.
"""

from __future__ import annotations

import sys

import numpy as np
from rich.color import Color
from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

from gradcli.results.inspection import (
    ForwardResult,
    JacobianBlock,
    JacobianResult,
    JvpResult,
    NamedArray,
    VjpResult,
)
from gradcli.render.formatting import fmt, label, plural, shown_notes

#: Arrays with at most this many entries are printed whole.
PRINT_LIMIT = 32
#: Complex or string arrays beyond PRINT_LIMIT show this many leading entries.
FIRST_SHOWN = 8
#: Jacobian blocks up to this many rows (output elements) and columns (input
#: elements) are drawn as tables; larger ones are summarised.
TABLE_ROWS = 24
TABLE_COLUMNS = 12

STATUS_STYLES = {"ok": "green", "vanishing": "bold yellow", "exploding": "bold red",
                 "zero weight": "dim", "disconnected": "yellow"}


def header(kind: str, model: str, dtype: str, method: str | None, out: Console) -> None:
    text = Text(f"{model}  [{kind}, {dtype}]", style="bold")
    if method:
        text.append(f"  {method}", style="dim")
    out.print(text)


def array_text(values: np.ndarray) -> str:
    return np.array2string(
        np.asarray(values), precision=7, threshold=sys.maxsize, max_line_width=100
    )


def describe(array: NamedArray) -> Text:
    """The values of a small array, or a summary of a large one."""
    if array.values is None:
        return Text("None: TensorFlow returns no gradient (disconnected)", style="yellow")
    if array.values.size <= PRINT_LIMIT:
        text = Text(array_text(array.values))
    elif array.summary is None:  # complex numbers or strings: no min/max/mean
        first = array.values.reshape(-1)[:FIRST_SHOWN]
        text = Text(
            f"first {first.size} of {array.values.size} entries: {array_text(first)} "
            "(all values: --json or --save FILE.npz)"
        )
    else:
        s = array.summary
        first = ", ".join(f"{v:.6g}" for v in s.first)
        text = Text(
            f"min {s.min:.6g}, max {s.max:.6g}, mean {s.mean:.6g}, norm {s.norm:.6g}; "
            f"first {len(s.first)} of {s.size} entries: [{first}] "
            "(all values: --json or --save FILE.npz)"
        )
    if array.error is not None:
        text.append(f"  (finite-difference error estimate {fmt(array.error)})", style="dim")
    return text


def array_table(title: str, arrays: list[NamedArray], out: Console, source: bool = False) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("shape", no_wrap=True)
    table.add_column("dtype", no_wrap=True)
    if source:
        table.add_column("seed", no_wrap=True)
    table.add_column("values")
    for a in arrays:
        row = [a.name, str(a.shape), a.dtype]
        if source:
            row.append(a.source)
        table.add_row(*row, describe(a))
    out.print(table)


def notes(lines: list[str], out: Console, style: str = "dim", prefix: str = "note", verbosity: int = 0) -> None:
    """Notes (``verbosity``: -q hides them, routine ones need -v: ``text.shown_notes``)."""
    for line in (lines if prefix != "note" else shown_notes(lines, verbosity)):
        out.print(Text(f"  {prefix}: {line}", style=style))


def render_forward(result: ForwardResult, out: Console, verbosity: int = 0) -> None:
    header("forward", result.model, result.dtype, None, out)
    array_table("outputs", result.outputs, out)
    notes(result.notes, out, verbosity=verbosity)


def render_vjp(result: VjpResult, out: Console, verbosity: int = 0) -> None:
    header("vjp", result.model, result.dtype, result.method, out)
    array_table("cotangents (seeds), one per output", result.seeds, out, source=True)
    array_table("vector-Jacobian products J^T c, one per input", result.gradients, out)
    if result.weights:
        render_weights(result, out)
    notes(result.warnings, out, style="bold yellow", prefix="warning")
    notes(result.notes, out, verbosity=verbosity)
    if result.evaluations:
        out.print(Text(f"  {plural(result.evaluations, 'function evaluation')}", style="dim"))


def render_weights(result: VjpResult, out: Console) -> None:
    table = Table(title="gradient norms per weight", title_justify="left", caption=result.weight_rule, caption_justify="left")
    for column in ("weight", "shape", "||w||", "||g||", "||g|| / ||w||", "status"):
        table.add_column(column, justify="left" if column in ("weight", "shape", "status") else "right",
                         no_wrap=column in ("weight", "shape"))
    for w in result.weights:
        table.add_row(
            w.name,
            str(w.shape),
            f"{w.weight_norm:.4g}",
            "-" if w.gradient_norm is None else f"{w.gradient_norm:.4g}",
            "-" if w.ratio is None else f"{w.ratio:.3g}",
            Text(w.status, style=STATUS_STYLES.get(w.status, "")),
        )
    out.print(table)


def render_jvp(result: JvpResult, out: Console, verbosity: int = 0) -> None:
    header("jvp", result.model, result.dtype, result.method, out)
    array_table("tangents, one per input", result.tangents, out)
    array_table("Jacobian-vector products J t, one per output", result.outputs, out)
    notes(result.notes, out, verbosity=verbosity)
    if result.evaluations:
        out.print(Text(f"  {plural(result.evaluations, 'function evaluation')}", style="dim"))


def render_jacobian(result: JacobianResult, out: Console, verbosity: int = 0) -> None:
    header("jacobian", result.model, result.dtype, result.method, out)
    out.print(Text(f"  {result.explanation}", style="dim"))
    for block in result.blocks:
        render_block(block, out)
    notes(result.notes, out, verbosity=verbosity)


def render_block(block: JacobianBlock, out: Console) -> None:
    title = f"d {block.output} / d {block.input}   shape {block.output_shape} x {block.input_shape}"
    if block.error is not None:
        title += f"   (finite-difference error estimate {fmt(block.error)})"
    if block.values is None:
        out.print(Text(title, style="bold"))
        out.print(Text("  None: TensorFlow returns no gradient (disconnected)", style="yellow"))
        return
    table, reason = None, f"too many to draw (tables go up to {TABLE_ROWS} x {TABLE_COLUMNS})"
    if block.rows <= TABLE_ROWS and block.columns <= TABLE_COLUMNS:
        table = jacobian_table(block, title)
        if table_width(table, block) > out.width:  # rich would elide cells with "..."
            table, reason = None, f"too wide to draw in {out.width} columns"
    if table is not None:
        out.print(table)
        out.print(
            Text(
                f"  colour: red positive, blue negative, brighter = larger |entry| "
                f"(scale 0 to {block.max_abs:.4g})",
                style="dim",
            )
        )
        return
    out.print(Text(title, style="bold"))
    out.print(
        f"  {block.rows * block.columns} entries ({block.rows} x {block.columns}), {reason}: Frobenius norm {block.frobenius_norm:.6g}, max |entry| {block.max_abs:.6g}, "
        f"{block.nonzero} nonzero. All values: --json or --save FILE.npz."
    )
    table = Table(
        title=f"  the {len(block.largest)} largest entries by magnitude", title_justify="left"
    )
    table.add_column("output element", no_wrap=True)
    table.add_column("input element", no_wrap=True)
    table.add_column("value", justify="right")
    for entry in block.largest:
        table.add_row(
            label(block.output, entry.output_index),
            label(block.input, entry.input_index),
            f"{entry.value:.7g}",
        )
    out.print(table)


def jacobian_table(block: JacobianBlock, title: str) -> Table:
    """Rows: output elements; columns: input elements; cells coloured by value."""
    matrix = block.values.reshape(block.rows, block.columns)
    rows = [list(np.unravel_index(i, block.output_shape)) if block.output_shape else [] for i in range(block.rows)]
    cols = [list(np.unravel_index(j, block.input_shape)) if block.input_shape else [] for j in range(block.columns)]
    table = Table(title=title, title_justify="left")
    table.add_column("", no_wrap=True)
    for c in cols:
        table.add_column(label(block.input, [int(i) for i in c]), justify="right")
    for r, index in enumerate(rows):
        cells = [Text(cell(v), style=scale_style(v, block.max_abs)) for v in matrix[r]]
        table.add_row(label(block.output, [int(i) for i in index]), *cells)
    return table


def cell(value: float) -> str:
    """Four significant digits (all of them: --json / --save); -0 shows as 0."""
    return "0" if value == 0 else f"{value:.4g}"


def table_width(table: Table, block: JacobianBlock) -> int:
    """Columns the table needs without eliding: widest label or cell per column,
    plus 3 for padding and the rule."""
    widths = [max(len(label(block.output, list(map(int, np.unravel_index(i, block.output_shape)))))
                  if block.output_shape else len(block.output) for i in range(block.rows))]
    matrix = block.values.reshape(block.rows, block.columns)
    for j, column in enumerate(table.columns[1:]):
        widths.append(max([len(str(column.header))] + [len(cell(v)) for v in matrix[:, j]]))
    return sum(w + 3 for w in widths) + 1


def scale_style(value: float, max_abs: float) -> Style:
    """Diverging colour scale: grey at zero to red (positive) or blue (negative)."""
    if value == 0 or max_abs == 0:
        return Style(dim=True)
    t = min(1.0, abs(float(value)) / max_abs)
    grey, target = (140, 140, 140), ((230, 60, 50) if value > 0 else (60, 120, 240))
    rgb = tuple(int(g + t * (c - g)) for g, c in zip(grey, target))
    return Style(color=Color.from_rgb(*rgb), bold=t > 0.5)
