"""``check --plot`` and ``jacobian --plot``: Jacobian blocks as heat maps (matplotlib, Agg).

Reads result objects only. Rows are output elements and columns input
elements, both flattened in row-major order, as the reports label them.
Colours are symmetric around zero (a diverging map), so a sign error shows
as a change of colour and a scale error as a change of shade.
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


def _heat_map(axis, values, title, extent_offset=(0, 0)):
    """A diverging heat map with its colour bar; limits symmetric around zero."""
    limit = float(np.nanmax(np.abs(values), initial=0.0)) or 1.0
    rows, cols = values.shape
    r0, c0 = extent_offset
    image = axis.imshow(
        values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest",
        extent=(c0 - 0.5, c0 + cols - 0.5, r0 + rows - 0.5, r0 - 0.5),
    )
    from matplotlib.ticker import MaxNLocator

    axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # elements are whole numbers
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("input element", fontsize=8)
    axis.set_ylabel("output element", fontsize=8)


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
        _heat_map(row[0], w.analytic, f"analytic: {name}", offset)
        _heat_map(row[1], w.numeric, "numeric (finite differences)", offset)
        _heat_map(row[2], w.analytic - w.numeric, f"analytic - numeric: {int(w.failing.sum())} failing (x)", offset)
        bad_rows, bad_cols = np.nonzero(w.failing)
        row[2].scatter(bad_cols + w.col_offset, bad_rows + w.row_offset, marker="x", c="black", s=18, linewidths=1)
        row[0].text(0.0, 1.12, model.name, transform=row[0].transAxes, fontsize=9, weight="bold")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    more = f" ({len(pairs) - len(shown)} more failing pairs not drawn)" if len(pairs) > len(shown) else ""
    return f"plotted {len(shown)} failing pair{'s' if len(shown) != 1 else ''} to {path}{more}"


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
        _heat_map(axis, matrix, title)
    for axis in list(axes.flat)[len(blocks):]:
        axis.set_axis_off()
    fig.suptitle(f"{result.model}: Jacobian ({result.mode})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    more = f" ({len(result.blocks) - len(blocks)} more not drawn)" if len(result.blocks) > len(blocks) else ""
    return f"plotted {len(blocks)} Jacobian block{'s' if len(blocks) != 1 else ''} to {path}{more}"
