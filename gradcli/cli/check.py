"""``gradcli check``."""

from __future__ import annotations

import click

from gradcli.cli.command import command
from gradcli.cli.settings import given_params
from gradcli.cli.options import (
    Shard, format_option, json_option, junit_option, max_memory_option, model_argument,
    model_options, native_dtype_option, plot_option, saved_model_options, summary_option,
    tolerance_options,
)


@command(
    "gradcli.render.text:render_check", render_params=("quiet",),
    formats={"github": "gradcli.render.github:render_github"},
)
@model_argument(many=True)
@model_options
@saved_model_options
@click.option("--mode", type=click.Choice(["auto", "full", "fast"]), default="auto", show_default=True, help="full: every Jacobian element; fast: random projections; auto: full when it fits --budget.")
@click.option("--budget", type=float, default=10.0, show_default=True, metavar="SECONDS", help="auto mode: run the full check when timed batches of its differences (along the largest input) predict it takes at most SECONDS, else fast. Also the time the element-wise re-checks of failing fast pairs may take, shared by their inputs (beyond an input's share, a random sample of its elements is shown).")
@tolerance_options("the comparison")
@click.option("--probes", type=click.IntRange(min=1), default=3, show_default=True, help="Random projections per pair in fast mode.")
@native_dtype_option
@click.option("--xla/--no-xla", default=None, help="Compile the finite-difference loops with XLA [default: where a group's predicted time makes it pay].")
@click.option("--order", type=click.IntRange(1, 2), default=1, show_default=True, help="2: also check second derivatives (Hessian-vector products against differences of the gradient).")
@click.option("--allow-surrogate", is_flag=True, help="Let surrogate (straight-through) gradients pass.")
@click.option("--autodiff", type=click.Choice(["both", "reverse"]), default="both", show_default=True, help="Which differentiation modes to check: both (reverse mode, the gradient, and forward mode, JVPs, by random probes) or reverse only (a note says forward mode was not checked).")
@click.option("--fail-on", multiple=True, metavar="WORDS", help="Verdicts that also fail a pair (comma-separated or repeated): zero, kink, surrogate, disconnected, inconclusive.")
@click.option("--taylor", is_flag=True, help="Run the Taylor remainder test on every pair and show its orders.")
@click.option("--samples", type=click.IntRange(min=0), default=0, show_default=True, help="Also check at N seeded random points around the given one; the worst is shown as --set values.")
@click.option("--radius", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True, help="Sweep points move each element by up to R * max(1, |x|).")
@click.option("--special", is_flag=True, help="Also check at special points: zeros, ties, repeated values, clipping boundaries found in the graph.")
@click.option("--by-layer/--no-by-layer", default=None, help="Also check a Keras model or a network of tf.Modules layer by layer (each layer's output against its input and weights, at the activations that reach it) [default: in auto mode, when the full check does not fit --budget].")
@click.option("--layers", multiple=True, metavar="NAME_OR_GLOB", help="Check only these layers (names or paths in the model, globs allowed; comma-separated or repeated); implies --by-layer.")
@max_memory_option
@json_option
@format_option("github")
@junit_option("Also write a JUnit XML report (one testcase per model, input and output).")
@summary_option("Append a Markdown report (the verdict tables) to PATH, e.g. $GITHUB_STEP_SUMMARY.")
@plot_option("Heat maps of the analytic and numeric Jacobian blocks of failing pairs and their difference, failing elements marked (needs matplotlib).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first model that fails or cannot be checked; the rest are reported as skipped.")
@click.option("--shard", type=Shard(), default=None, metavar="K/N", help="Check only shard K of N of the models (sorted by path, dealt round robin): one CI matrix job each.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="Stop a model file still running after SECONDS of its own (counted once its worker has imported TensorFlow; the worker is ended): that model is an error row (exit 3), the others are still checked.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out the files a folder MODEL holds that match GLOB (git's glob rules, relative to the working folder; repeatable); hidden folders, virtual environments and what .gitignore ignores are always left out.")
@click.option("--include", multiple=True, metavar="GLOB", help="Check only the files a folder MODEL holds that match GLOB (git's glob rules, relative to the working folder; repeatable).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Check models in N worker processes. Each starts TensorFlow: it pays off only for slow models on idle cores.")
@click.option("-q", "--quiet", is_flag=True, help="Report only models that fail, and the summary; no progress bar.")
def check(models, wrt, fail_on, fail_fast, shard, jobs, quiet, as_json, output_format,
          junit_xml, summary, plot, include, exclude, **options):
    """Compare analytic gradients with finite differences.

    MODEL is a model file (FILE.py or FILE.py:NAME), a folder of them, a
    saved Keras model (FILE.keras) or a SavedModel folder (DIR or
    DIR:SIGNATURE), whose data come from --input (--loss compiled: the loss
    it was compiled with, the targets as --input y=...);
    without MODEL, the `paths` of [tool.gradcli] in pyproject.toml. Options
    default to [tool.gradcli] values, then to a model file's `check` dict; the
    command line wins. Exit 0 if every check passes, 1 if one fails, 2 on bad
    usage, 3 if a model could not be loaded, run or checked.

    \b
    Example:
      gradcli check sample_models/buggy_custom_gradient.py --mode full
    """
    from gradcli.model.paths import shard_models

    if not models:
        raise click.UsageError("no MODEL given and no `paths` in [tool.gradcli] of a pyproject.toml")
    specs = collect(models, include, exclude)
    if shard is not None:
        specs = shard_models(specs, *shard)
    options = check_options({
        **options, "wrt": wrt, "fail_on": fail_on,
        "keep_blocks": bool(plot),
    })
    from gradcli.workers.batch import check_batch, isolation_default
    from gradcli.render.progress import progress_callback

    # Model files run in supervised workers (TensorFlow is imported there, not
    # here), so one that ends its process is an error row, not a lost report.
    with progress_callback(enabled=not (as_json or quiet), total=len(specs)) as progress:
        return check_batch(
            specs, options, fixed=set(given_params()), fail_fast=fail_fast,
            jobs=jobs, progress=progress, isolate=isolation_default(),
        )


def check_options(params: dict):
    """``CheckOptions`` from the parsed parameters of ``check`` (also what the
    pytest plugin builds from ``[tool.gradcli]``)."""
    from gradcli.config import options_from_params
    from gradcli.model.values import parse_assignments, parse_names
    from gradcli.options import CheckOptions

    return options_from_params(CheckOptions, {
        **params, "wrt": parse_names(params["wrt"]),
        "set": parse_assignments(params["set"], "--set"),
        "input": parse_assignments(params.get("input", ()), "--input"),
        "fail_on": parse_names(params["fail_on"]) or [],
        "layers": parse_names(params.get("layers") or ()) or None,
    })


def collect(models, include, exclude) -> list[str]:
    """The model files of MODEL... (``gradcli.model.paths.collect_models``), and
    one note on stderr saying how many files a folder held that are not
    checked, and why (each file with ``-v``; none with ``-q``). Globs given on
    the command line are relative to the working folder; those of
    ``[tool.gradcli]`` to the folder of the file that sets them."""
    import os

    from gradcli.cli.settings import CONFIG, FROM_CONFIG
    from gradcli.cli.options import VERBOSITY
    from gradcli.model.paths import collect_models, patterns

    ctx = click.get_current_context()
    config = ctx.meta.get(CONFIG)

    def anchored(name, globs):
        configured = name in ctx.meta.get(FROM_CONFIG, {}) and config is not None and config.path
        return patterns(globs, os.path.dirname(config.path) if configured else os.getcwd())

    found = collect_models(models, include=anchored("include", include), exclude=anchored("exclude", exclude))
    verbosity = ctx.meta.get(VERBOSITY, 0)
    if found.note and verbosity >= 0:
        click.echo(f"note: {found.note}", err=True)
        if verbosity > 0:
            from gradcli.model.paths import relative_path

            for path, reason in found.skipped:
                click.echo(f"note: skipped {relative_path(path)}: {reason[0]}", err=True)
    return found.specs
