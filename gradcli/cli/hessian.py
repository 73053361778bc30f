"""``gradcli hessian``."""

from __future__ import annotations

import importlib.util

import click

from gradcli.errors import GradcliError

from gradcli.cli.common import emit_json, start_tensorflow, text_console


def _positive(ctx, param, value):
    if value is not None and not value > 0:
        raise click.BadParameter(f"must be > 0, got {value}")
    return value


def _non_negative(ctx, param, value):
    if value is not None and not value >= 0:
        raise click.BadParameter(f"must be >= 0, got {value}")
    return value


@click.command()
@click.argument("model", metavar="MODEL")
@click.option("--wrt", multiple=True, metavar="NAMES", help="Inputs to differentiate (comma-separated or repeated); the Hessian is with respect to all of them flattened together.")
@click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE", help="Override an input: JSON literal, @file.npy or @file.npz:key.")
@click.option("--cotangent", "cotangents", multiple=True, metavar="OUTPUT=VALUE", help="The scalar is sum of <VALUE, OUTPUT> over the outputs given [default: the single output, cotangent ones].")
@click.option("--method", type=click.Choice(["auto", "dense", "lanczos"]), default="auto", show_default=True, help="dense: build the Hessian; lanczos: extreme eigenvalues from Hessian-vector products; auto: dense up to 2000 parameters.")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True, help="Lanczos: how many of the smallest and of the largest eigenvalues.")
@click.option("--samples", type=click.IntRange(min=0), default=0, show_default=True, help="Also look at N points drawn around the point (needs --radius).")
@click.option("--radius", type=float, default=None, callback=_positive, help="Half-width of the box sampled around the point (absolute, per element); with --plot, the slice width [default 1].")
@click.option("--rng-seed", type=int, default=0, show_default=True, help="Seed for sampling, Lanczos start vector, trace probes and random inputs.")
@click.option("--expect", type=click.Choice(["convex", "concave"]), default=None, help="Exit 1 unless the Hessian is positive (negative) semidefinite at the point and every sample.")
@click.option("--zero-tol", type=float, default=None, callback=_non_negative, help="Eigenvalues with |lambda| <= this count as zero [default: derived, and printed].")
@click.option("--tol", type=float, default=1e-8, show_default=True, help="Lanczos: stop when each residual <= tol * max|lambda|.")
@click.option("--trace-probes", type=click.IntRange(min=2), default=32, show_default=True, help="Lanczos: Rademacher probes for Hutchinson's trace estimate.")
@click.option("--fd-check/--no-fd-check", default=True, show_default=True, help="Check the Hessian against finite differences of the gradient.")
@click.option("--rtol", type=float, default=None, callback=_non_negative, help="Relative tolerance of the finite-difference check [default as in check].")
@click.option("--atol", type=float, default=None, callback=_non_negative, help="Absolute tolerance of the finite-difference check [default as in check].")
@click.option("--native-dtype", is_flag=True, help="Work in the model's own dtype instead of promoting to float64.")
@click.option("--plot", "plot_path", metavar="FILE.png", default=None, help="Plot the spectrum and the slice along the lowest eigenvector (needs matplotlib: pip install 'gradcli[plot]').")
@click.option("--save", "save_path", metavar="FILE.npz", default=None, help="Save eigenvalues, Hessian (dense), point and witness as .npz.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README).")
@click.option("--junit-xml", "junit_path", type=click.Path(dir_okay=False), metavar="PATH", help="Also write a JUnit XML report (the expectation and the finite-difference check as testcases).")
def hessian(model, wrt, overrides, cotangents, method, top, samples, radius, rng_seed, expect,
            zero_tol, tol, trace_probes, fd_check, rtol, atol, native_dtype, plot_path,
            save_path, as_json, junit_path):
    """Hessian of MODEL's scalar output: eigenvalues, definiteness, convexity.

    Exit 0 when done (and any --expect holds), 1 if --expect fails or the
    Hessian disagrees with finite differences, 2 on bad usage, 3 if the model
    could not be loaded, run or differentiated.
    """
    from gradcli.model.values import parse_assignments, parse_names

    values = parse_assignments(overrides, "--set")
    cotangent_values = parse_assignments(cotangents, "--cotangent")
    if samples and radius is None:
        raise click.UsageError("--samples needs --radius (the half-width of the box to sample)")
    if radius is not None and not samples and not plot_path:
        raise click.UsageError("--radius needs --samples N (or --plot, where it sets the slice width)")
    if not 0 < tol < 1:
        raise click.BadParameter(f"must be between 0 and 1, got {tol}", param_hint="--tol")
    if plot_path and importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError("--plot needs matplotlib: pip install 'gradcli[plot]'")
    start_tensorflow()
    from gradcli.analyses.hessian import HessianOptions, analyse_path

    options = HessianOptions(
        wrt=parse_names(wrt), overrides=values, cotangents=cotangent_values, method=method,
        top=top, samples=samples, radius=radius, rng_seed=rng_seed, expect=expect,
        zero_tol=zero_tol, tol=tol, trace_probes=trace_probes, fd_check=fd_check, rtol=rtol,
        atol=atol, slice=bool(plot_path), float64=not native_dtype,
    )
    try:
        result = analyse_path(model, options)
    except GradcliError as exc:
        if junit_path and exc.exit_code == 3:
            _write_junit(junit_path, None, str(exc), model)
        raise
    if junit_path:
        _write_junit(junit_path, result)
    if save_path:
        from gradcli.render.hessian_files import save_npz

        save_npz(result, save_path)
    if plot_path:
        from gradcli.render.hessian_files import save_plot

        save_plot(result, plot_path)
    if as_json:
        from gradcli.render.hessian_text import hessian_document

        emit_json(hessian_document(result))
    else:
        from gradcli.render.hessian_text import render_hessian

        render_hessian(result, text_console())
    return result.exit_code


def _write_junit(path, result, error=None, model=""):
    from gradcli.render.junit import hessian_cases, write

    try:
        write(hessian_cases(result, error, model), path, "gradcli hessian")
    except OSError as exc:
        raise click.BadParameter(f"cannot write {path}: {exc.strerror}", param_hint="--junit-xml")
