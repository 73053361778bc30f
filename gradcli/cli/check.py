"""``gradcli check``."""

from __future__ import annotations

import os

import click

from gradcli.cli.common import (
    configured_params,
    emit_json,
    start_tensorflow,
    text_console,
    model_options,
)
from gradcli.model.paths import expand_models


@click.command()
@click.argument("models", nargs=-1, metavar="[MODEL]...")
@model_options
@click.option("--mode", type=click.Choice(["auto", "full", "fast"]), default="auto", show_default=True, help="full: every Jacobian element; fast: random projections; auto: full when it fits --budget.")
@click.option("--budget", type=float, default=10.0, show_default=True, metavar="SECONDS", help="auto mode: run the full check when one timed batch predicts it takes at most SECONDS, else fast.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance [default: 1e-6 in float64, 1e-3 in float32].")
@click.option("--atol", type=float, default=None, help="Absolute tolerance [default: 1e-9 in float64, 1e-5 in float32].")
@click.option("--probes", type=click.IntRange(min=1), default=3, show_default=True, help="Random projections per pair in fast mode.")
@click.option("--native-dtype", is_flag=True, help="Check in the model's own dtype instead of promoting to float64.")
@click.option("--xla/--no-xla", default=None, help="Compile the finite-difference batches with XLA [default: off; it did not pay in bench/check_speed.py].")
@click.option("--order", type=click.IntRange(1, 2), default=1, show_default=True, help="2: also check second derivatives (Hessian-vector products against differences of the gradient).")
@click.option("--allow-surrogate", is_flag=True, help="Let surrogate (straight-through) gradients pass.")
@click.option("--taylor", is_flag=True, help="Run the Taylor remainder test on every pair and show its orders.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README).")
@click.option("--junit-xml", type=click.Path(dir_okay=False), metavar="PATH", help="Also write a JUnit XML report (one testcase per model, input and output).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first model that fails or cannot be checked; the rest are reported as skipped.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Check models in N worker processes. Each starts TensorFlow: it pays off only for slow models on idle cores.")
@click.option("-q", "--quiet", is_flag=True, help="Report only models that fail, and the summary; no progress bar.")
def check(**_):
    """Compare analytic gradients with finite differences.

    MODEL is a model file (FILE.py or FILE.py:NAME) or a folder of them;
    without MODEL, the `paths` of [tool.gradcli] in pyproject.toml. Options
    default to [tool.gradcli] values, then to a model file's `check` dict; the
    command line wins. Exit 0 if every check passes, 1 if one fails, 2 on bad
    usage, 3 if a model could not be loaded, run or checked.
    """
    from gradcli.config import option_fields, options_from_params
    from gradcli.model.values import parse_assignments, parse_names

    p, given = configured_params(click.get_current_context())
    if not p["models"]:
        raise click.UsageError(
            "no MODEL given and no `paths` in [tool.gradcli] of a pyproject.toml"
        )
    specs = expand_models(p["models"])
    values = parse_assignments(p["overrides"], "--set")
    wrt_names = parse_names(p["wrt"])
    for name in ("rtol", "atol"):
        if p[name] is not None and not p[name] >= 0:
            raise click.BadParameter(f"must be >= 0, got {p[name]}", param_hint=f"--{name}")
    junit = p["junit_xml"]
    if junit and not os.path.isdir(os.path.dirname(os.path.abspath(junit))):
        raise click.BadParameter(f"folder of {junit} does not exist", param_hint="--junit-xml")
    start_tensorflow()
    from gradcli.analyses.check import CheckOptions, check_paths

    options = options_from_params(CheckOptions, {**p, "wrt": wrt_names, "overrides": values})
    from gradcli.render.progress import progress_callback

    with progress_callback(enabled=not (p["as_json"] or p["quiet"]), total=len(specs)) as progress:
        result = check_paths(
            specs, options, fixed=option_fields(given), fail_fast=p["fail_fast"],
            jobs=p["jobs"], progress=progress,
        )
    if junit:
        from gradcli.render.junit import write_check

        try:
            write_check(result, junit)
        except OSError as exc:
            raise click.BadParameter(f"cannot write {junit}: {exc.strerror}", param_hint="--junit-xml")
    if p["as_json"]:
        from gradcli.render.json import check_document

        emit_json(check_document(result))
    else:
        from gradcli.render.text import render_check

        render_check(result, text_console(), quiet=p["quiet"])
    for model in result.models:
        if model.error is not None:
            click.echo(f"Error: {model.error}", err=True)
    return result.exit_code
