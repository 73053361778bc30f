"""``gradcli logdet``."""

from __future__ import annotations

import click

from gradcli.cli.command import command
from gradcli.cli.options import json_option, max_memory_option, model_argument, tolerance_options


@command("gradcli.render.text:render_logdet")
@model_argument()
@click.option("--wrt", metavar="NAME", help="The input x of y = f(x) (default: the only floating input).")
@click.option("--output", metavar="NAME", help="The output y (default: the only floating output).")
@click.option("--set", "set", multiple=True, metavar="NAME=VALUE", help="Override an input: JSON literal, @file.npy or @file.npz:key.")
@click.option("--rng-seed", type=int, default=0, show_default=True, help="Seed for random inputs and weights; 0 to 2**32-1.")
@tolerance_options("the comparison")
@max_memory_option
@json_option
def logdet(model, as_json, **options):
    """Compare a flow's log_det_jacobian with slogdet of its autodiff Jacobian.

    MODEL maps R^n to R^n per example and defines `log_det_jacobian` (same
    inputs, one value per example). The autodiff Jacobian is first checked
    against central differences of the flow along random directions: where it
    is wrong, the gradient at fault is named and the log-det is judged against
    the central-difference Jacobian instead. Exit 0 if every example agrees, 1
    if one disagrees or the Jacobian is wrong, 2 on bad usage, 3 if the model
    could not be loaded or run.

    \b
    Example:
      gradcli logdet sample_models/realnvp_flow.py
    """
    from gradcli.model.values import parse_assignments
    from gradcli.options import LogdetOptions

    options = LogdetOptions(**{**options, "set": parse_assignments(options["set"], "--set")})
    from gradcli.workers.batch import run_isolated

    return run_isolated("gradcli.analyses.logdet:check_logdet_path", model, model, options)
