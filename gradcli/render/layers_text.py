"""The layer table of a layer-by-layer pass (``ModelResult.layers``), for the
text report. Reads result objects only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

#: Rows shown after the failing ones (a ResNet-50 has 170-odd layer calls);
#: every row is in the JSON report.
PASSING_ROWS = 12


def render_layers(model, out: Console) -> None:
    """Failures first (they come sorted), then up to ``PASSING_ROWS`` others;
    under the table each failing layer with its class, path, ``call`` line,
    worst element and culprit."""
    from gradcli.render.text import VERDICT_STYLES, render_call_proof, render_diagnosis, render_failure, times_rms

    layers = model.layers
    if not layers:
        return
    failing = [r for r in layers if r.failed]
    shown = failing + [r for r in layers if not r.failed][:PASSING_ROWS]
    table = Table(title=f"layer by layer: {len(layers)} layer calls", title_justify="left")
    for column in ("layer", "class", "weights", "mode", "verdict", "power", "seconds"):
        table.add_column(column, justify="right" if column in ("weights", "power", "seconds") else "left")
    for r in shown:
        style = VERDICT_STYLES.get(r.verdict, "bold red" if r.failed else "yellow")
        power = times_rms(r.power.relative, table=True) if r.power is not None else ("every element" if r.mode == "full" else "-")
        table.add_row(escape(r.label), r.class_name, str(r.weights), r.mode or "-", Text(r.verdict, style=style),
                      power, f"{r.seconds:.2f}")
    out.print(table)
    hidden = len(layers) - len(shown)
    if hidden:
        out.print(Text(f"  ... and {hidden} more passing layer calls (all in --json)", style="dim"))
    fast = [r for r in layers if r.power is not None]
    if fast:
        out.print(Text(
            "  power: the smallest single-element error of a layer's gradient that its random "
            f"projections see with probability {fast[0].power.probability:.0%}, relative to its RMS element "
            "(a percentage of it, or a multiple: 12x)",
            style="dim",
        ))
    for r in failing:
        where = f" (call at {r.call_site})" if r.call_site else ""
        out.print(Text(f"  FAIL layer {r.label}: {r.class_name}{where}: {r.verdict}", style="bold red"))
        if r.call_proof is not None and r.call_proof.differs:
            render_call_proof(r.call_proof, out)
        for pair in r.pairs:
            if pair.failed:
                render_failure(pair, out)
                render_diagnosis(pair, out)
    for r in layers:
        if r.error:
            out.print(Text(f"  layer {r.label} ({r.class_name}) could not be checked: {r.error}", style="yellow"))
