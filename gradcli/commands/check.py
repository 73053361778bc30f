"""``gradcli check``."""

from __future__ import annotations

import click

from gradcli.commands.common import emit_json, expand_models, model_options, start_tensorflow, text_console


@click.command()
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@model_options
@click.option("--mode", type=click.Choice(["auto", "full", "fast"]), default="auto", show_default=True, help="full: every Jacobian element; fast: random projections; auto: full up to 5000 elements.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance [default: 1e-6 in float64, 1e-3 in float32].")
@click.option("--atol", type=float, default=None, help="Absolute tolerance [default: 1e-9 in float64, 1e-5 in float32].")
@click.option("--probes", type=click.IntRange(min=1), default=3, show_default=True, help="Random projections per pair in fast mode.")
@click.option("--native-dtype", is_flag=True, help="Check in the model's own dtype instead of promoting to float64.")
@click.option("--xla", is_flag=True, help="Compile the finite-difference batches with XLA.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README).")
def check(models, wrt, mode, rtol, atol, probes, overrides, rng_seed, native_dtype, xla, as_json):
    """Compare analytic gradients with finite differences.

    MODEL is a model file (FILE.py or FILE.py:NAME) or a folder of them.
    Exit 0 if every check passes, 1 if one fails, 2 on bad usage, 3 if a model
    could not be loaded, run or checked.
    """
    from gradcli.values import parse_assignments, parse_names

    specs = expand_models(models)
    values = parse_assignments(overrides, "--set")
    wrt_names = parse_names(wrt)
    for name, value in (("--rtol", rtol), ("--atol", atol)):
        if value is not None and not value >= 0:
            raise click.BadParameter(f"must be >= 0, got {value}", param_hint=name)
    start_tensorflow()
    from gradcli.check import CheckOptions, check_paths

    options = CheckOptions(
        mode=mode, rtol=rtol, atol=atol, probes=probes, rng_seed=rng_seed,
        wrt=wrt_names, overrides=values, float64=not native_dtype, jit_compile=xla,
    )
    result = check_paths(specs, options)
    if as_json:
        from gradcli.render.json import check_document

        emit_json(check_document(result))
    else:
        from gradcli.render.text import render_check

        render_check(result, text_console())
    for model in result.models:
        if model.error is not None:
            click.echo(f"Error: {model.error}", err=True)
    return result.exit_code
