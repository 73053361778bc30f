"""Human-readable reports with rich. Reads result objects only."""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gradcli.results import CheckResult, Element, ModelResult, PairResult

VERDICT_STYLES = {
    "pass": "green",
    "zero": "yellow",
    "disconnected": "yellow",
    "mismatch": "bold red",
    "inconclusive": "bold red",
    "kink": "yellow",
    "surrogate": "bold magenta",
}


def console(file=None) -> Console:
    """A console for ``file`` (stdout): rich honours NO_COLOR and FORCE_COLOR;
    a stream that is not a terminal gets no colour and a fixed width of 120
    unless COLUMNS says otherwise, so piped reports do not wrap at 80."""
    file = file or sys.stdout
    width = None
    if not (hasattr(file, "isatty") and file.isatty()) and "COLUMNS" not in os.environ:
        width = 120
    return Console(file=file, width=width, highlight=False, soft_wrap=True)


def fmt(value: float) -> str:
    return f"{value:.3g}" if value != 0 else "0"


def where(element: Element, pair: PairResult) -> str:
    if pair.mode == "fast" and not element.output_index and len(element.input_index) == 1:
        return f"probe {element.input_index[0]}"
    return f"{label(pair.output, element.output_index)} / {label(pair.input, element.input_index)}"


def label(name: str, index: list[int]) -> str:
    """``x[1, 2]``; a scalar is its bare name."""
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def render_check(result: CheckResult, out: Console, quiet: bool = False) -> None:
    """Each model's report (with ``quiet``, only those not ok), then for a batch
    a summary table, then one line with the count."""
    for model in result.models:
        if not (quiet and model.ok):
            render_model(model, out)
    if len(result.models) + len(result.skipped) > 1:
        render_summary(result, out)
    failed = [m for m in result.models if not m.ok]
    summary = f"{len(result.models) - len(failed)} of {len(result.models)} models passed"
    if result.skipped:
        summary += f", {len(result.skipped)} not run (--fail-fast)"
    out.print(Text(summary, style="green" if not failed else "bold red"))


def model_verdict(model: ModelResult) -> str:
    """``pass``, ``error``, or ``fail`` with the failing verdicts."""
    if model.error is not None:
        return "error"
    failing = sorted({p.verdict for p in model.pairs if p.failed})
    if model.sweep is not None and model.sweep.failed:
        failing.append("sweep")
    if model.not_the_users_function:
        failing.insert(0, "not the user's function")
    return f"fail ({', '.join(failing)})" if failing else "pass"


def render_summary(result: CheckResult, out: Console) -> None:
    table = Table(title="summary", title_justify="left")
    for column in ("model", "inputs checked", "pairs", "verdict", "time"):
        table.add_column(column, justify="right" if column in ("inputs checked", "pairs", "time") else "left")
    for model in result.models:
        verdict = model_verdict(model)
        style = "green" if verdict == "pass" else "bold red"
        inputs = len(dict.fromkeys(p.input for p in model.pairs))
        table.add_row(model.name, str(inputs), str(len(model.pairs)), Text(verdict, style=style),
                      f"{model.seconds:.2f} s")
    for name in result.skipped:
        table.add_row(name, "-", "-", Text("not run", style="yellow"), "-")
    out.print(table)


def plain_text(render, width: int = 120) -> str:
    """What ``render(console)`` prints, as plain text (no colour, whatever the
    environment says): for JUnit reports and assertion messages."""
    import io

    buffer = io.StringIO()
    render(Console(file=buffer, width=width, color_system=None, force_terminal=False,
                   highlight=False, soft_wrap=True))
    return buffer.getvalue().rstrip("\n")


def render_model(model: ModelResult, out: Console) -> None:
    if model.error is not None:
        out.print(Text(f"{model.name}: error: {model.error}", style="bold red"))
        return
    table = Table(
        title=escape(f"{model.name}  [{model.mode}, {model.dtype}, rtol={model.tolerance.rtol:g}, "
        f"atol={model.tolerance.atol:g}]"),
        title_justify="left",
    )
    for column in ("input", "output", "verdict", "max abs err", "max rel err",
                   "worst element", "analytic", "numeric"):
        table.add_column(column, justify="right" if "err" in column or column in ("analytic", "numeric") else "left")
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
    for note in model.notes:
        out.print(Text(f"  note: {note}", style="dim"))
    if model.sweep is not None:
        render_sweep(model.sweep, out)
    out.print(
        Text(f"  {model.evaluations} function evaluations, {model.seconds:.2f} s", style="dim")
    )


def render_call_proof(proof, out: Console) -> None:
    """The failed proof that the checked function is the user's own: every
    verdict above is about another function."""
    out.print(Text(
        f"  FAIL the function checked is not the user's own: one gradient through gradcli's "
        f"call and through {proof.call} differ ({proof.detail}); the verdicts above are not "
        "about the function you train",
        style="bold red",
    ))


def render_sweep(sweep, out: Console) -> None:
    """One line for the sweep, and the worst point with the ``--set`` that reproduces it."""
    what = f"{sweep.samples} random points within radius {sweep.radius:g} (seed {sweep.seed})"
    if sweep.special:
        what += " and special points"
    extra = f"; {sweep.outside} outside the model's domain, not checked" if sweep.outside else ""
    if sweep.dropped:
        extra += f"; {sweep.dropped} special points over the limit, not checked"
    if not sweep.failed:
        out.print(Text(f"  sweep: {what}: all {sweep.points} pass{extra}", style="green"))
        return
    worst = sweep.worst
    out.print(Text(
        f"  FAIL sweep: {what}: {sweep.n_failing} of {sweep.points} fail{extra}", style="bold red",
    ))
    detail = f"{worst.verdict}" + (
        f": {worst.error}" if worst.error else f", rel err {fmt(worst.score)}"
    )
    out.print(Text(f"    worst: {worst.label} ({detail})", style="bold red"))
    out.print(f"    reproduce it alone with: {escape(sweep.witness)}")


def render_failure(pair: PairResult, out: Console) -> None:
    out.print(Text(f"  FAIL {pair.input} -> {pair.output}: {pair.verdict}: {pair.explanation}", style="bold red"))
    if pair.n_failing:
        out.print(f"    {pair.n_failing} of {pair.compared} compared elements outside tolerance; worst first:")
    for element in pair.failing:
        out.print(
            f"    {where(element, pair)}: analytic {element.analytic:.10g}, numeric "
            f"{element.numeric:.10g} (abs err {fmt(element.abs_error)}, rel err "
            f"{fmt(element.rel_error)}, fd error estimate {fmt(element.fd_error)})"
        )
    if pair.n_failing > len(pair.failing):
        out.print(f"    ... and {pair.n_failing - len(pair.failing)} more elements outside tolerance, not listed")


def render_failed_pair(pair: PairResult, out: Console) -> None:
    """A failing pair's whole report: its elements, then its diagnosis."""
    render_failure(pair, out)
    render_diagnosis(pair, out)


def render_diagnosis(pair: PairResult, out: Console) -> None:
    """Kinks with their one-sided slopes, graph sites, the culprit op, Taylor orders."""
    if pair.kinks:
        out.print(f"  kink {pair.input} -> {pair.output}: {pair.n_kinks} elements on a "
                  "non-differentiability (one-sided slopes):")
        for k in pair.kinks:
            ok = "valid subgradient" if k.subgradient else "outside [left, right]: not a subgradient"
            out.print(
                f"    {label(pair.output, k.output_index)} / {label(pair.input, k.input_index)}: "
                f"left {k.left:.7g}, right {k.right:.7g}, analytic {k.analytic:.7g} ({ok})"
            )
        if pair.n_kinks > len(pair.kinks):
            out.print(f"    ... and {pair.n_kinks - len(pair.kinks)} more kinks, not listed")
    power = pair.power
    if power is not None:
        out.print(
            f"  power {pair.input} -> {pair.output}: {power.probes} random projections would "
            f"see a single element off by {fmt(power.absolute)} or more ({fmt(100 * power.relative)}% "
            f"of the RMS element {fmt(power.element_size)}) with probability {power.probability:.0%}"
        )
    culprit = pair.culprit
    if culprit is not None:
        site = culprit.site
        text = (
            f"    culprit: {site.description} ({site.op_type} '{site.op_name}') at "
            f"{site.location or 'an unknown line'}"
        )
        if culprit.definition:
            text += f", defined at {culprit.definition}"
        out.print(Text(text, style="bold red"))
        out.print(
            f"      its {culprit.checked} gives {culprit.analytic:.10g} for a random probe, finite "
            f"differences {culprit.numeric:.10g} (rel err {fmt(culprit.rel_error)}); "
            f"{culprit.checked_ops} ops checked on the path"
        )
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


def render_logdet(result, out: Console) -> None:
    """The worst examples of ``gradcli logdet``, worst first, and the verdict."""
    table = Table(
        title=f"{result.name}  [{result.input} -> {result.output}, n={result.dimension}, "
        f"{result.batch} examples, {result.dtype}, rtol={result.tolerance.rtol:g}, "
        f"atol={result.tolerance.atol:g}]",
        title_justify="left",
    )
    for column in ("example", "log_det_jacobian", "slogdet(J)", "sign", "abs err", "verdict"):
        table.add_column(column, justify="left" if column in ("example", "verdict") else "right")
    for e in result.examples:
        table.add_row(
            str(e.index), f"{e.declared:.10g}", f"{e.logabsdet:.10g}", f"{e.sign:+.0f}",
            fmt(e.abs_error), Text("pass" if e.ok else "mismatch", style="green" if e.ok else "bold red"),
        )
    out.print(table)
    for note in result.notes:
        out.print(Text(f"  note: {note}", style="dim"))
    worst = result.worst
    if result.ok:
        out.print(Text(
            f"log_det_jacobian agrees with slogdet of the Jacobian at all {result.batch} examples "
            f"(worst abs err {fmt(worst.abs_error)} at example {worst.index})", style="green",
        ))
    else:
        out.print(Text(
            f"FAIL log_det_jacobian disagrees at {result.n_failing} of {result.batch} examples; worst: "
            f"example {worst.index}, declared {worst.declared:.10g}, slogdet {worst.logabsdet:.10g} "
            f"(abs err {fmt(worst.abs_error)})", style="bold red",
        ))
