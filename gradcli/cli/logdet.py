"""``gradcli logdet``."""

from __future__ import annotations

import click

from gradcli.cli.common import emit_json, start_tensorflow, text_console


@click.command()
@click.argument("model", metavar="MODEL")
@click.option("--wrt", metavar="NAME", help="The input x of y = f(x) (default: the only floating input).")
@click.option("--output", metavar="NAME", help="The output y (default: the only floating output).")
@click.option("--rtol", type=click.FloatRange(min=0), default=None, help="Relative tolerance [default: 1e-6 in float64].")
@click.option("--atol", type=click.FloatRange(min=0), default=None, help="Absolute tolerance [default: 1e-9 in float64].")
@click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE", help="Override an input: JSON literal, @file.npy or @file.npz:key.")
@click.option("--rng-seed", type=int, default=0, show_default=True, help="Seed for random inputs and weights.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README).")
def logdet(model, wrt, output, rtol, atol, overrides, rng_seed, as_json):
    """Compare a flow's log_det_jacobian with slogdet of its autodiff Jacobian.

    MODEL maps R^n to R^n per example and defines `log_det_jacobian` (same
    inputs, one value per example). Exit 0 if every example agrees, 1 if one
    disagrees, 2 on bad usage, 3 if the model could not be loaded or run.
    """
    from gradcli.model.values import parse_assignments

    values = parse_assignments(overrides, "--set")
    start_tensorflow()
    from gradcli.analyses.logdet import check_logdet
    from gradcli.model.loading import load_model

    loaded = load_model(model, wrt=[wrt] if wrt else None, overrides=values, rng_seed=rng_seed)
    result = check_logdet(loaded, output, rtol=rtol, atol=atol)
    if as_json:
        from gradcli.render.json import logdet_document

        emit_json(logdet_document(result))
    else:
        from gradcli.render.text import render_logdet

        render_logdet(result, text_console())
    return result.exit_code
