"""Human-readable reports with rich. Reads result objects only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gradcli.render.formatting import (  # noqa: F401 - re-exported: the helpers every report shares
    LOG_WIDTH, ROUTINE_NOTES, VERDICT_STYLES, console, fmt, label, plain_text, plural, printable, shown_notes,
    times_rms, where,
)
from gradcli.results import CheckResult, ModelResult, PairResult

#: The one order of elements in every report: the ratio that decides the verdict.
ORDER = "worst first, by error / allowed"
#: The table's column of the worst element, in that order.
WORST_COLUMN = "worst (error / allowed)"

def _name_column(table: Table, header: str, **kwargs) -> None:
    """A column of names or indices: never broken inside a cell (rich shrinks
    the other columns first)."""
    table.add_column(header, no_wrap=True, overflow="fold", **kwargs)


def render_check(result: CheckResult, out: Console, quiet: bool = False, verbosity: int = 0,
                 interrupted: bool = False) -> None:
    """Each model's report (with ``quiet``, only those not ok), then for a batch
    a summary table, then one line with the count: of the models checked, how
    many passed, and how many were not run, and why (``--fail-fast``, or
    ``interrupted``: Ctrl-C or SIGTERM stopped the run before them)."""
    if quiet:
        verbosity = min(verbosity, -1)
    for model in result.models:
        if not (quiet and model.ok):
            render_model(model, out, verbosity)
    if len(result.models) + len(result.skipped) > 1:
        render_summary(result, out, interrupted)
    failed = [m for m in result.models if not m.ok]
    total = len(result.models)
    summary = f"{total - len(failed)} of {plural(total, 'model')} passed"
    if interrupted:  # "interrupted after 2 of 3 models: 1 of 2 passed, 1 not run"
        summary = (f"interrupted after {total} of {plural(total + len(result.skipped), 'model')}: "
                   f"{total - len(failed)} of {total} passed")
    if result.skipped:
        summary += f", {len(result.skipped)} not run" + ("" if interrupted else " (--fail-fast)")
    out.print(Text(summary, style="green" if not (failed or interrupted) else "bold red"))


def model_verdict(model: ModelResult) -> str:
    """``pass``, ``error``, or ``fail`` with the failing verdicts."""
    if model.error is not None:
        return "error"
    failing = sorted({p.verdict for p in model.pairs if p.failed})
    if model.sweep is not None and model.sweep.failed:
        failing.append("sweep")
    if any(layer.failed for layer in model.layers):
        failing.append("layer by layer")
    if model.not_the_users_function:
        failing.insert(0, "not the user's function")
    return f"fail ({', '.join(failing)})" if failing else "pass"


def render_summary(result: CheckResult, out: Console, interrupted: bool = False) -> None:
    table = Table(title="summary", title_justify="left")
    _name_column(table, "model")
    for column in ("inputs checked", "pairs", "verdict", "time"):
        table.add_column(column, justify="left" if column == "verdict" else "right", no_wrap=True)
    for model in result.models:
        verdict = model_verdict(model)
        style = "green" if verdict == "pass" else "bold red"
        inputs = len(dict.fromkeys(p.input for p in model.pairs))
        table.add_row(printable(model.name), str(inputs), str(len(model.pairs)), Text(verdict, style=style),
                      f"{model.seconds:.2f} s")
    for name in result.skipped:
        table.add_row(printable(name), "-", "-", Text("not finished" if interrupted else "not run", style="yellow"), "-")
    out.print(table)


def render_model(model: ModelResult, out: Console, verbosity: int = 0) -> None:
    if model.error is not None:
        out.print(Text(f"{printable(model.name)}: error: {printable(model.error)}", style="bold red"))
        if model.tolerance is None:  # stopped before any check (else: what it checked is shown too)
            return
    table = Table(
        title=escape(f"{printable(model.name)}  [{model.mode}, {model.dtype}, rtol={model.tolerance.rtol:g}, "
        f"atol={model.tolerance.atol:g}]"),
        title_justify="left",
    )
    _name_column(table, "input")
    _name_column(table, "output")
    table.add_column("verdict", no_wrap=True)
    for column in ("max abs err", "max rel err"):
        table.add_column(column, justify="right", no_wrap=True)
    _name_column(table, WORST_COLUMN)
    for column in ("analytic", "numeric"):
        table.add_column(column, justify="right", no_wrap=True)
    for pair in model.pairs:
        worst = pair.worst
        table.add_row(
            pair.input,
            pair.output,
            Text(pair.verdict, style=VERDICT_STYLES.get(pair.verdict, "bold red" if pair.failed else "yellow")),
            fmt(pair.max_abs_error),
            fmt(pair.max_rel_error),
            where(worst, pair) if worst else "-",
            f"{worst.analytic:.7g}" if worst else "-",
            f"{worst.numeric:.7g}" if worst else "-",
        )
    out.print(table)
    if model.not_the_users_function:
        render_call_proof(model.call_proof, out)
    for pair in model.pairs:
        if pair.failed:
            render_failure(pair, out)
        render_diagnosis(pair, out)
        for warning in pair.warnings:
            out.print(Text(f"  warning: {pair.input} -> {pair.output}: {warning}", style="yellow"))
    for note in shown_notes(model.notes, verbosity):
        out.print(Text(f"  note: {note}", style="dim"))
    if model.sweep is not None:
        render_sweep(model.sweep, out, model.path)
    render_layers(model, out)
    out.print(
        Text(f"  {plural(model.evaluations, 'function evaluation')}, {model.seconds:.2f} s", style="dim")
    )


def render_call_proof(proof, out: Console) -> None:
    """The failed proof that the checked function is the user's own: every
    verdict above is about another function."""
    if proof.nondeterministic:
        out.print(Text(f"  FAIL {proof.detail}; no verdict above can be trusted", style="bold red"))
        return
    out.print(Text(
        f"  FAIL the function checked is not the user's own: one gradient through gradcli's "
        f"call and through {proof.call} differ ({proof.detail}); the verdicts above are not "
        "about the function you train",
        style="bold red",
    ))


def render_sweep(sweep, out: Console, model_path: str = "") -> None:
    """One line for the sweep, and the worst point with the ``--set`` that
    reproduces it (large values by file: ``gradcli.render.witness``)."""
    from gradcli.render.witness import set_arguments

    what = f"{plural(sweep.samples, 'random point')} within radius {sweep.radius:g} (seed {sweep.seed})"
    if sweep.special:
        what += " and special points"
    extra = f"; {sweep.outside} outside the model's domain, not checked" if sweep.outside else ""
    if sweep.dropped:
        extra += f"; {plural(sweep.dropped, 'special point')} over the limit, not checked"
    if not sweep.failed:
        everything = "the 1 point passes" if sweep.points == 1 else f"all {sweep.points} pass"
        out.print(Text(f"  sweep: {what}: {everything}{extra}", style="green"))
        return
    worst = sweep.worst
    fail = "fails" if sweep.n_failing == 1 else "fail"
    out.print(Text(
        f"  FAIL sweep: {what}: {sweep.n_failing} of {sweep.points} {fail}{extra}", style="bold red",
    ))
    detail = f"{worst.verdict}" + (
        f": {worst.error}" if worst.error else f", rel err {fmt(worst.score)}"
    )
    out.print(Text(f"    worst: {worst.label} ({detail})", style="bold red"))
    witness = " ".join(set_arguments(worst.values, model_path)) if worst.values else sweep.witness
    out.print(f"    reproduce it alone with: {escape(witness)}")


def render_failure(pair: PairResult, out: Console) -> None:
    out.print(Text(f"  FAIL {pair.input} -> {pair.output}: {pair.verdict}: {pair.explanation}", style="bold red"))
    if pair.n_failing:
        what = "probe" if pair.mode == "fast" else "element"
        out.print(f"    {pair.n_failing} of {plural(pair.compared, 'compared ' + what)} outside tolerance; "
                  f"{ORDER}:")
    for element in pair.failing:
        out.print(
            f"    {where(element, pair)}: analytic {element.analytic:.10g}, numeric "
            f"{element.numeric:.10g} (abs err {fmt(element.abs_error)}, rel err "
            f"{fmt(element.rel_error)}, fd error estimate {fmt(element.fd_error)})"
        )
    if pair.n_failing > len(pair.failing):
        out.print(f"    ... and {plural(pair.n_failing - len(pair.failing), 'more element')} outside "
                  "tolerance, not listed")


def render_failed_pair(pair: PairResult, out: Console) -> None:
    """A failing pair's whole report: its elements, then its diagnosis."""
    render_failure(pair, out)
    render_diagnosis(pair, out)


def render_diagnosis(pair: PairResult, out: Console) -> None:
    """Kinks with their one-sided slopes, graph sites, the culprit op, Taylor orders."""
    if pair.kinks:
        out.print(f"  kink {pair.input} -> {pair.output}: {plural(pair.n_kinks, 'element')} on a "
                  "non-differentiability (one-sided slopes):")
        for k in pair.kinks:
            if k.jump:
                ok = "a jump: no derivative exists"
            elif k.subgradient:
                ok = "valid subgradient"
            elif k.tie:
                ok = "between its slopes, but not a subgradient: at a tie, moved with the tied elements"
            else:
                ok = escape("outside [left, right]: not a subgradient")
            out.print(
                f"    {label(pair.output, k.output_index)} / {label(pair.input, k.input_index)}: "
                f"left {k.left:.7g}, right {k.right:.7g}, analytic {k.analytic:.7g} ({ok})"
            )
        if pair.n_kinks > len(pair.kinks):
            out.print(f"    ... and {plural(pair.n_kinks - len(pair.kinks), 'more kink')}, not listed")
    power = pair.power
    if power is not None:
        out.print(
            f"  power {pair.input} -> {pair.output}: {plural(power.probes, 'random projection')} would "
            f"see a single element off by {fmt(power.absolute)} or more ({times_rms(power.relative)} "
            f"the RMS element {fmt(power.element_size)}) with probability {power.probability:.0%}"
        )
    if pair.culprit is not None:
        render_culprit(pair.culprit, out)
    taylor = pair.taylor
    if taylor is not None:
        orders = " ".join(f"{o:.2f}" for o in taylor.orders[-6:]) or "-"
        order = "-" if taylor.order is None else f"{taylor.order:.2f}"
        meaning = {
            "second order": "consistent with the gradient",
            "first order": "the gradient is wrong, or the point is on a kink",
            "exact": "linear along the direction: remainder at round-off",
            "unclear": "no clean order",
            "not finite": "the gradient or the function is not finite along the direction",
        }[taylor.verdict]
        out.print(
            f"    Taylor remainder {pair.input} -> {pair.output}: orders {orders} -> "
            f"{order}, {taylor.verdict}: {meaning}"
        )


def render_culprit(culprit, out: Console, indent: str = "    ") -> None:
    """The op whose own gradient is wrong (``Culprit``): what and where, where
    its gradient is defined, and the probe that convicted it."""
    site = culprit.site
    text = (
        f"{indent}culprit: {site.description} ({site.op_type} '{site.op_name}') at "
        f"{printable(site.location) or 'an unknown line'}"
    )
    if culprit.definition:
        text += f", defined at {printable(culprit.definition)}"
    out.print(Text(text, style="bold red"))
    if culprit.checked not in ("gradient's shape", "first non-finite value"):  # no probe to show
        out.print(
            f"{indent}  its {culprit.checked} gives {culprit.analytic:.10g} for a random probe, finite "
            f"differences {culprit.numeric:.10g} (rel err {fmt(culprit.rel_error)}); "
            f"{plural(culprit.checked_ops, 'op')} checked on the path"
        )


def render_logdet(result, out: Console, verbosity: int = 0) -> None:
    """The examples of ``gradcli logdet`` in batch order (the worst ones when
    there are many), and the verdict. The header is the other commands':
    ``name  [mode, dtype, tolerances]  what was computed`` (plain text: a
    bracket is no rich markup). A bijector's result has its inverse's table
    after forward's, then the identities between the two."""
    table = Table(
        title=Text(
            f"{result.name}  [jacobian, {result.dtype}, rtol={result.tolerance.rtol:g}, "
            f"atol={result.tolerance.atol:g}]  {result.input} -> {result.output}: slogdet of the autodiff "
            f"Jacobian{' (of central differences where it is wrong)' if result.n_jacobian_wrong else ''}, "
            f"n={result.dimension}, {plural(result.batch, 'example')}"
        ),
        title_justify="left",
    )
    declared = result.declared_name
    checked = any(e.jacobian != "agrees" for e in result.examples)  # a column only when it says something
    columns = ["example", declared, "slogdet(J)", "sign", "abs err"] + (["autodiff J"] if checked else []) + ["verdict"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("example", "verdict", "autodiff J") else "right")
    for e in result.examples:
        row = [str(e.index), f"{e.declared:.10g}", f"{e.logabsdet:.10g}", f"{e.sign:+.0f}", fmt(e.abs_error)]
        if checked:
            row.append(Text(f"{e.jacobian} ({fmt(e.jacobian_rel_error)})" if e.jacobian == "wrong" else e.jacobian,
                            style="bold red" if e.jacobian == "wrong" else ""))
        style = {True: "green", False: "bold red"}.get(e.ok, "yellow")
        table.add_row(*row, Text(e.verdict, style=style))
    out.print(table)
    for note in shown_notes(result.notes, verbosity):
        out.print(Text(f"  note: {note}", style="dim"))
    for line in result.jacobian_findings:
        out.print(Text(line, style="bold red" if line.startswith("FAIL") else "green"))
    if result.culprit is not None:
        render_culprit(result.culprit, out, indent="  ")
    for line in result.log_det_findings:
        out.print(Text(line, style="bold red" if line.startswith("FAIL") else "green"))
    site, defined = result.log_det_site, result.log_det_definition
    if site is not None or defined:
        text = f"  culprit: {declared}"
        if site is not None:
            text += f" as computed by {site.description} ({site.op_type} '{site.op_name}') at {printable(site.location)}"
        if defined:
            text += f"{',' if site is not None else ''} in the function defined at {printable(defined)}"
        out.print(Text(text, style="bold red"))
    if result.inverse is not None:
        render_logdet(result.inverse, out, verbosity)
    for c in result.consistency:
        if c.ok:
            out.print(Text(f"{c.identity} at all {result.batch} examples (worst abs err "
                           f"{fmt(c.worst_error)} at example {c.worst_example})", style="green"))
        else:
            out.print(Text(
                f"FAIL {c.identity} broken at {c.n_failing} of {result.batch} examples; worst: example "
                f"{c.worst_example}, abs err {fmt(c.worst_error)} (allowed {fmt(c.allowed)})", style="bold red",
            ))


#: Rows of the layer table shown after the failing ones (a ResNet-50 has 170-odd
#: layer calls); every row is in the JSON report.
PASSING_ROWS = 12


def render_layers(model, out: Console) -> None:
    """Failures first (they come sorted), then up to ``PASSING_ROWS`` others;
    under the table each failing layer with its class, path, ``call`` line,
    worst element and culprit."""
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
