"""``gradcli check``."""

from __future__ import annotations

import click

from gradcli.cli.command import command, given_params
from gradcli.cli.options import (
    json_option, junit_option, max_memory_option, model_argument, model_options,
    native_dtype_option, tolerance_options,
)


@command("gradcli.render.text:render_check", render_params=("quiet",))
@model_argument(many=True)
@model_options
@click.option("--mode", type=click.Choice(["auto", "full", "fast"]), default="auto", show_default=True, help="full: every Jacobian element; fast: random projections; auto: full up to 5000 elements.")
@tolerance_options("the comparison")
@click.option("--probes", type=click.IntRange(min=1), default=3, show_default=True, help="Random projections per pair in fast mode.")
@native_dtype_option
@click.option("--xla/--no-xla", default=None, help="Compile the finite-difference batches with XLA [default: for inputs of 4096 or more elements].")
@click.option("--order", type=click.IntRange(1, 2), default=1, show_default=True, help="2: also check second derivatives (Hessian-vector products against differences of the gradient).")
@click.option("--allow-surrogate", is_flag=True, help="Let surrogate (straight-through) gradients pass.")
@click.option("--taylor", is_flag=True, help="Run the Taylor remainder test on every pair and show its orders.")
@max_memory_option
@json_option
@junit_option("Also write a JUnit XML report (one testcase per model, input and output).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first model that fails or cannot be checked; the rest are reported as skipped.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Check models in N worker processes. Each starts TensorFlow: it pays off only for slow models on idle cores.")
@click.option("-q", "--quiet", is_flag=True, help="Report only models that fail, and the summary; no progress bar.")
def check(models, overrides, wrt, fail_fast, jobs, quiet, as_json, junit_xml, **options):
    """Compare analytic gradients with finite differences.

    MODEL is a model file (FILE.py or FILE.py:NAME) or a folder of them;
    without MODEL, the `paths` of [tool.gradcli] in pyproject.toml. Options
    default to [tool.gradcli] values, then to a model file's `check` dict; the
    command line wins. Exit 0 if every check passes, 1 if one fails, 2 on bad
    usage, 3 if a model could not be loaded, run or checked.

    \b
    Example:
      gradcli check sample_models/buggy_custom_gradient.py --mode full
    """
    from gradcli.config import option_fields, options_from_params
    from gradcli.model.paths import expand_models
    from gradcli.model.values import parse_assignments, parse_names
    from gradcli.options import CheckOptions

    if not models:
        raise click.UsageError("no MODEL given and no `paths` in [tool.gradcli] of a pyproject.toml")
    specs = expand_models(models)
    options = options_from_params(CheckOptions, {
        **options, "wrt": parse_names(wrt), "overrides": parse_assignments(overrides, "--set"),
    })
    from gradcli.analyses.batch import check_batch, isolation_default
    from gradcli.render.progress import progress_callback

    # Model files run in supervised workers (TensorFlow is imported there, not
    # here), so one that ends its process is an error row, not a lost report.
    with progress_callback(enabled=not (as_json or quiet), total=len(specs)) as progress:
        return check_batch(
            specs, options, fixed=option_fields(given_params()), fail_fast=fail_fast,
            jobs=jobs, progress=progress, isolate=isolation_default(),
        )
