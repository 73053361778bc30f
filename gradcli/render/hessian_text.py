"""``gradcli hessian`` in the terminal and as JSON. Reads ``HessianResult`` only."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradcli.results.hessian import CONVEX_VERDICTS, HessianResult, Sampling, Spectrum
from gradcli.render.formatting import fmt, plural, shown_notes
from gradcli.render.text import render_model
from gradcli.render.witness import set_arguments
from gradcli.results import ModelResult

#: Up to this many parameters the Hessian is printed element by element.
MATRIX_LIMIT = 10
#: Up to this many eigenvalues are listed one by one.
LIST_LIMIT = 20
BARS = " ▁▂▃▄▅▆▇█"


def num(value: float) -> str:
    """Nine significant digits: enough to compare against a closed form by eye."""
    return f"{value:.9g}"


def render_hessian(result: HessianResult, out: Console, verbosity: int = 0) -> None:
    spectrum = result.spectrum
    out.print(Text(f"{result.name}  [{spectrum.method}, {result.dtype}, n={result.n}]", style="bold"))
    out.print(f"  function: {result.function}")
    out.print(f"  f = {num(result.value)}, |gradient| = {fmt(result.gradient_norm)}")
    if result.hessian is not None:
        render_matrix(result, out)
        out.print(f"  symmetry error max|H - H^T| = {fmt(result.symmetry_error)}")
    render_eigenvalues(spectrum, out)
    for line in spectrum_strip(spectrum):
        out.print("  " + line)
    style = "green" if spectrum.verdict in CONVEX_VERDICTS else "yellow"
    out.print(Text.assemble("  verdict: ", (spectrum.verdict, f"bold {style}")))
    out.print(f"    |lambda| <= {spectrum.zero_tol:.3g} counts as zero: {spectrum.zero_rule}")
    if spectrum.condition is not None:
        out.print(f"  condition number: {fmt(spectrum.condition)}")
    trace = result.trace
    if trace.method == "exact":
        out.print(f"  trace: {num(trace.estimate)} (exact)")
    else:
        out.print(
            f"  trace: {num(trace.estimate)} +- {fmt(trace.stderr)} (Hutchinson, "
            f"{trace.probes} Rademacher probes, standard error)"
        )
    if result.fd_check is not None:
        check = result.fd_check
        render_model(
            ModelResult(
                name="finite-difference check of the Hessian", path=result.path,
                dtype=result.dtype, mode=check.mode, tolerance=check.tolerance,
                pairs=check.pairs, evaluations=check.evaluations, seconds=check.seconds,
            ),
            out, verbosity,
        )
    if result.sampling is not None:
        render_sampling(result.sampling, spectrum, out, result.path)
    if result.expect:
        ok = result.expectation_met
        out.print(Text(
            f"  expect {result.expect}: {'ok' if ok else 'FAILED'}: {result.expectation_reason}",
            style="green" if ok else "bold red",
        ))
    for note in shown_notes(result.notes, verbosity):
        out.print(Text(f"  note: {note}", style="dim"))
    out.print(Text(f"  {plural(spectrum.hvps, 'Hessian-vector product')}, {result.seconds:.2f} s", style="dim"))


def render_matrix(result: HessianResult, out: Console) -> None:
    H = result.hessian
    if result.n <= MATRIX_LIMIT:
        table = Table(title="  Hessian", title_justify="left")
        table.add_column("", no_wrap=True)
        for name in result.labels:
            table.add_column(name, justify="right", no_wrap=True)
        for name, row in zip(result.labels, H):
            table.add_row(name, *[num(v) for v in row])
        out.print(table)
        return
    table = Table(title=f"  Hessian ({result.n} x {result.n}), max |H| per block", title_justify="left")
    table.add_column("", no_wrap=True)
    for block in result.blocks:
        table.add_column(block.name, justify="right", no_wrap=True)
    for bi in result.blocks:
        rows = slice(bi.offset, bi.offset + bi.size)
        table.add_row(bi.name, *[
            fmt(np.abs(H[rows, bj.offset : bj.offset + bj.size]).max()) for bj in result.blocks
        ])
    out.print(table)


def render_eigenvalues(spectrum: Spectrum, out: Console) -> None:
    values = spectrum.eigenvalues
    if spectrum.method == "lanczos":
        table = Table(title="  extreme eigenvalues (Lanczos)", title_justify="left")
        table.add_column("eigenvalue", justify="right")
        table.add_column("residual", justify="right")
        for value, residual in zip(values, spectrum.residuals):
            table.add_row(num(value), fmt(residual))
        out.print(table)
        return
    if len(values) <= LIST_LIMIT:
        out.print(f"  eigenvalues ({len(values)}): " + "  ".join(num(v) for v in values))
    else:
        out.print(
            f"  eigenvalues ({len(values)}): " + "  ".join(num(v) for v in values[:5])
            + "  ...  " + "  ".join(num(v) for v in values[-5:])
        )


def spectrum_strip(spectrum: Spectrum, width: int = 48) -> list[str]:
    """A one-line histogram of the eigenvalues on [smallest, largest], linear
    scale, bar height ~ count in the bin; ``0`` under the strip marks zero."""
    values = np.asarray(spectrum.eigenvalues, float)
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= spectrum.zero_tol or len(values) < 2:
        return [f"spectrum: all eigenvalues at {num(lo)}"]
    counts, _ = np.histogram(values, bins=width, range=(lo, hi))
    levels = np.where(counts > 0, 1 + np.round((len(BARS) - 2) * np.log1p(counts) / np.log1p(counts.max())), 0)
    bar = "".join(BARS[int(level)] for level in levels)
    axis = [" "] * width
    if lo < 0 < hi:
        axis[min(width - 1, int((0 - lo) / (hi - lo) * width))] = "0"
    what = "extremes only" if spectrum.method == "lanczos" else "all eigenvalues"
    lines = [f"spectrum ({what}): {num(lo)} |{bar}| {num(hi)}"]
    if "0" in axis:
        lines.append(" " * (len(f"spectrum ({what}): {num(lo)} |")) + "".join(axis))
    return lines


def render_sampling(sampling: Sampling, spectrum: Spectrum, out: Console, model_path: str = "") -> None:
    points = sampling.samples + 1
    out.print(
        f"  sampled {plural(sampling.samples, 'point')} ({sampling.rule}); zero tolerance "
        f"{spectrum.zero_tol:.3g}:"
    )
    has = "has" if sampling.n_negative == 1 else "have"
    out.print(f"    {sampling.n_negative} of {points} points (the given one included) {has} a negative eigenvalue")
    has = "has" if sampling.n_positive == 1 else "have"
    out.print(f"    {sampling.n_positive} of {points} points {has} a positive eigenvalue")
    if sampling.n_nonfinite:
        what = "point had NaN/Inf in the Hessian and was" if sampling.n_nonfinite == 1 else \
            "points had NaN/Inf in the Hessian and were"
        out.print(f"    {sampling.n_nonfinite} {what} skipped")
    worst = sampling.worst
    if worst is not None:
        which = "smallest" if sampling.witness_for == "convex" else "largest"
        value = worst.smallest if which == "smallest" else worst.largest
        out.print(f"    witness (the {which} eigenvalue, {num(value)}, {worst.verdict}):")
        out.print(Text("      " + " ".join(set_arguments(worst.values, model_path)), style="bold"))
