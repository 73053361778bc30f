"""``check --plot`` and ``jacobian --plot``: Jacobian blocks as heat maps (matplotlib, Agg).

Reads result objects only. Rows are output elements and columns input
elements, flattened in row-major order; the ticks name them as the reports do,
by their index in the array (``[i, j]`` for a matrix, ``i`` for a vector), and
a scalar's single row or column is labelled with its name instead of a
numbered axis. Colours are symmetric around zero (a diverging map), so a sign
error shows as a change of colour and a scale error as a change of shade.
Failing elements are marked with hollow squares, black on a white outline,
visible on the darkest red and blue and on white alike.
"""

from __future__ import annotations

import numpy as np

#: Panels drawn at most (failing pairs of a check, blocks of a Jacobian): a
#: picture with more rows is unreadable; the report lists them all.
MAX_PANELS = 6
#: jacobian: a block with more elements than this shows its top-left corner
#: (imshow of a larger array only resamples what the eye cannot see anyway).
MAX_ELEMENTS = 1_000_000


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def index_label(flat: int, shape) -> str:
    """The element at row-major position ``flat`` of an array of ``shape``:
    ``[i, j]`` for two or more dimensions, ``i`` for a vector."""
    shape = tuple(int(n) for n in shape or ())
    if len(shape) <= 1:
        return str(int(flat))
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(int(flat), shape)) + "]"


def _axis(axis, which: str, name: str, shape, count: int, offset: int) -> None:
    """Ticks of one axis: element indices of ``shape`` (``[i, j]`` for a
    matrix), or the bare name of a scalar (one element)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ticks = axis.xaxis if which == "x" else axis.yaxis
    set_label = axis.set_xlabel if which == "x" else axis.set_ylabel
    role = "input" if which == "x" else "output"
    shape = tuple(shape or ())
    if count == 1 and not shape:  # a scalar: one labelled row or column, no numbered axis
        (axis.set_xticks if which == "x" else axis.set_yticks)([offset])
        (axis.set_xticklabels if which == "x" else axis.set_yticklabels)([name or role])
        set_label(f"{role} (scalar)", fontsize=8)
        return
    ticks.set_major_locator(MaxNLocator(integer=True, nbins=8 if which == "x" else 10))
    size = int(np.prod(shape)) if shape else None

    def label(value, _position):
        flat = int(round(value))
        if abs(value - flat) > 1e-6 or flat < 0 or (size is not None and flat >= size):
            return ""
        return index_label(flat, shape)

    ticks.set_major_formatter(FuncFormatter(label))
    what = f"{role} element of {name}" if name else f"{role} element"
    if len(shape) >= 2:
        what += f" {list(shape)}"
    set_label(what, fontsize=8)
    if which == "x" and len(shape) >= 2:
        for tick in axis.get_xticklabels():
            tick.set_rotation(30)
    axis.tick_params(labelsize=7)


def _heat_map(axis, values, title, extent_offset=(0, 0), names=("", ""), shapes=None):
    """A diverging heat map with its colour bar; limits symmetric around zero.
    ``names``/``shapes``: (output, input) names and shapes for the ticks
    (None: plain flattened positions)."""
    limit = float(np.nanmax(np.abs(values), initial=0.0)) or 1.0
    rows, cols = values.shape
    r0, c0 = extent_offset
    image = axis.imshow(
        values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest",
        extent=(c0 - 0.5, c0 + cols - 0.5, r0 + rows - 0.5, r0 - 0.5),
    )
    axis.figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    axis.set_title(title, fontsize=9)
    output_shape, input_shape = shapes if shapes is not None else ((rows,), (cols,))
    _axis(axis, "y", names[0], output_shape, rows, r0)
    _axis(axis, "x", names[1], input_shape, cols, c0)


def mark_failing(axis, rows, cols) -> None:
    """Hollow squares, black with a white outline: visible on every colour of the map."""
    import matplotlib.patheffects as effects

    axis.scatter(
        cols, rows, marker="s", s=46, facecolors="none", edgecolors="black", linewidths=1.4,
        path_effects=[effects.Stroke(linewidth=3.2, foreground="white"), effects.Normal()],
        zorder=3,
    )


def save_check_plot(result, path: str) -> str:
    """One row per failing pair that carries a window (``PairResult.window``):
    analytic, numeric, and analytic - numeric with the failing elements marked.
    Writes nothing when no pair failed; returns the line for stderr."""
    pairs = [
        (model, pair) for model in result.models for pair in model.pairs
        if pair.failed and pair.window is not None
    ]
    if not pairs:
        return f"no failing pair with a Jacobian block to plot: {path} not written"
    shown = pairs[:MAX_PANELS]
    plt = _pyplot()
    fig, axes = plt.subplots(len(shown), 3, figsize=(13, 3.6 * len(shown)), squeeze=False)
    for row, (model, pair) in zip(axes, shown):
        w = pair.window
        offset = (w.row_offset, w.col_offset)
        where = ""
        if (w.analytic.shape[0], w.analytic.shape[1]) != (w.rows, w.columns):
            where = f", rows {w.row_offset}..{w.row_offset + w.analytic.shape[0] - 1} of {w.rows}, " \
                    f"columns {w.col_offset}..{w.col_offset + w.analytic.shape[1] - 1} of {w.columns}"
        name = f"{pair.input} -> {pair.output} ({pair.verdict}{where})"
        names = (pair.output, pair.input)
        shapes = _window_shapes(w)
        failing = int(w.failing.sum())
        _heat_map(row[0], w.analytic, f"analytic: {name}", offset, names, shapes)
        _heat_map(row[1], w.numeric, "numeric (finite differences)", offset, names, shapes)
        _heat_map(row[2], w.analytic - w.numeric,
                  f"analytic - numeric: {failing} failing (squares)", offset, names, shapes)
        bad_rows, bad_cols = np.nonzero(w.failing)
        mark_failing(row[2], bad_rows + w.row_offset, bad_cols + w.col_offset)
        row[0].text(0.0, 1.12, model.name, transform=row[0].transAxes, fontsize=9, weight="bold")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    left = len(pairs) - len(shown)
    more = f" ({left} more failing {'pair' if left == 1 else 'pairs'} not drawn)" if left else ""
    return f"plotted {len(shown)} failing pair{'s' if len(shown) != 1 else ''} to {path}{more}"


def _window_shapes(w):
    """(output shape, input shape) of a window's block, when the result has them."""
    output_shape, input_shape = tuple(w.output_shape or ()), tuple(w.input_shape or ())
    if int(np.prod(output_shape)) != w.rows or int(np.prod(input_shape)) != w.columns:
        return None  # an older result without shapes: flattened positions
    return output_shape, input_shape


def save_jacobian_plot(result, path: str) -> str:
    """One heat map per block (output x input), up to ``MAX_PANELS``."""
    blocks = result.blocks[:MAX_PANELS]
    plt = _pyplot()
    columns = min(len(blocks), 3) or 1
    rows = -(-len(blocks) // columns) or 1
    fig, axes = plt.subplots(rows, columns, figsize=(4.8 * columns, 4.0 * rows), squeeze=False)
    for axis, block in zip(axes.flat, blocks):
        title = f"d {block.output} / d {block.input}"
        if block.values is None:
            axis.text(0.5, 0.5, "disconnected (no gradient)", ha="center", va="center")
            axis.set_title(title, fontsize=9)
            axis.set_axis_off()
            continue
        matrix = np.asarray(block.values, dtype=float).reshape(block.rows, block.columns)
        side = int(np.sqrt(MAX_ELEMENTS))
        if matrix.size > MAX_ELEMENTS:
            matrix = matrix[:side, :side]
            title += f" (top-left {matrix.shape[0]} x {matrix.shape[1]} of {block.rows} x {block.columns})"
        _heat_map(axis, matrix, title, names=(block.output, block.input),
                  shapes=(tuple(block.output_shape), tuple(block.input_shape)))
    for axis in list(axes.flat)[len(blocks):]:
        axis.set_axis_off()
    fig.suptitle(f"{result.model}: Jacobian ({result.mode})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    more = f" ({len(result.blocks) - len(blocks)} more not drawn)" if len(result.blocks) > len(blocks) else ""
    return f"plotted {len(blocks)} Jacobian block{'s' if len(blocks) != 1 else ''} to {path}{more}"
