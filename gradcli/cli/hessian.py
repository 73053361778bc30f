"""``gradcli hessian``."""

from __future__ import annotations

import click

from gradcli.cli.command import command
from gradcli.cli.options import (
    json_option, junit_option, max_memory_option, model_argument, model_options,
    native_dtype_option, plot_option, save_option, tolerance_options,
)


@command("gradcli.render.hessian_text:render_hessian", implied={"slice": "plot"})
@model_argument()
@model_options
@click.option("--cotangent", "cotangents", multiple=True, metavar="OUTPUT=VALUE", help="The scalar is sum of <VALUE, OUTPUT> over the outputs given [default: the single output, cotangent ones].")
@click.option("--method", type=click.Choice(["auto", "dense", "lanczos"]), default="auto", show_default=True, help="dense: build the Hessian; lanczos: extreme eigenvalues from Hessian-vector products; auto: dense up to 2000 parameters.")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True, help="Lanczos: how many of the smallest and of the largest eigenvalues.")
@click.option("--samples", type=click.IntRange(min=0), default=0, show_default=True, help="Also look at N points drawn around the point (needs --radius).")
@click.option("--radius", type=float, default=None, metavar="R", help="With --samples (required there): sampled points move each element by up to R * max(1, |x|), as in check --samples. With --plot alone: the slice along the lowest eigenvector spans t in [-R, R] [default 1].")
@click.option("--expect", type=click.Choice(["convex", "concave"]), default=None, help="Exit 1 unless the Hessian is positive (negative) semidefinite at the point and every sample.")
@click.option("--zero-tol", type=float, default=None, help="Eigenvalues with |lambda| <= this count as zero [default: derived, and printed].")
@click.option("--tol", type=float, default=1e-8, show_default=True, help="Lanczos: stop when each residual <= tol * max|lambda|.")
@click.option("--trace-probes", type=click.IntRange(min=2), default=32, show_default=True, help="Lanczos: Rademacher probes for Hutchinson's trace estimate.")
@click.option("--fd-check/--no-fd-check", default=True, show_default=True, help="Check the Hessian against finite differences of the gradient.")
@tolerance_options("the finite-difference check")
@native_dtype_option
@max_memory_option
@plot_option("Plot the spectrum and the slice along the lowest eigenvector (needs matplotlib: pip install 'gradcli[plot]').")
@save_option("Save eigenvalues, Hessian (dense), point and witness as .npz.")
@json_option
@junit_option("Also write a JUnit XML report (the expectation and the finite-difference check as testcases).")
def hessian(model, wrt, cotangents, as_json, save, junit_xml, **options):
    """Hessian of MODEL's scalar output: eigenvalues, definiteness, convexity.

    Exit 0 when done (and any --expect holds), 1 if --expect fails or the
    Hessian disagrees with finite differences, 2 on bad usage, 3 if the model
    could not be loaded, run or differentiated.

    \b
    Example:
      gradcli hessian sample_models/least_squares.py --expect convex
    """
    from gradcli.config import options_from_params
    from gradcli.model.values import parse_assignments, parse_names
    from gradcli.options import HessianOptions

    options = options_from_params(HessianOptions, {
        **options, "wrt": parse_names(wrt), "set": parse_assignments(options["set"], "--set"),
        "slice": bool(options.get("plot")),  # a plot draws the slice along the lowest eigenvector
        "cotangents": parse_assignments(cotangents, "--cotangent"),
    })
    from gradcli.workers.batch import run_isolated
    from gradcli.render.progress import progress_callback

    # Lanczos and sampling report stages on a terminal (when the model runs in-process)
    from gradcli.cli.options import VERBOSITY

    quiet = click.get_current_context().meta.get(VERBOSITY, 0) < 0
    with progress_callback(enabled=not (as_json or quiet), total=1):
        return run_isolated("gradcli.analyses.hessian:analyse_path", model, model, options)
