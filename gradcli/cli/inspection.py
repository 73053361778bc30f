"""``gradcli forward``, ``vjp``, ``jvp`` and ``jacobian``: show derivatives as numbers.

Each command parses its options (numpy only), imports TensorFlow, loads the
model, calls ``gradcli.analyses.inspection``, renders the result and optionally saves its
arrays to an ``.npz`` file whose keys the next call can read as ``@FILE.npz:KEY``.
Exit 0 on success, 2 on bad usage, 3 if the model could not be loaded or run.
"""

from __future__ import annotations

import os

import click

from gradcli.cli.common import emit_json, model_options, start_tensorflow, text_console


def inspect_options(command):
    """MODEL, the model-loading options, ``--input``, ``--json`` and ``--save``."""
    options = [
        click.argument("model_spec", metavar="MODEL"),
        model_options,
        click.option("--input", "data", multiple=True, metavar="NAME=VALUE", help="Data input of a .keras MODEL (a single-input model takes any NAME)."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README)."),
        click.option("--save", type=click.Path(dir_okay=False), metavar="FILE.npz", help="Save the result arrays, keyed by name, for @FILE.npz:KEY."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def numeric_option(command):
    return click.option("--numeric", is_flag=True, help="Finite differences only, for models TensorFlow cannot differentiate (e.g. numpy code).")(command)


def _check_save(path: str | None) -> None:
    if path is None:
        return
    if not path.endswith(".npz"):
        raise click.BadParameter(f"{path!r} must end in .npz", param_hint="--save")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.BadParameter(f"folder {folder!r} does not exist", param_hint="--save")


class _Call:
    """What every inspect command does around its own computation."""

    def __init__(self, model_spec, wrt, overrides, rng_seed, data, save):
        from gradcli.model.values import parse_assignments, parse_names

        self.spec = model_spec
        self.wrt = parse_names(wrt)
        self.overrides = parse_assignments(overrides, "--set")
        self.data = parse_assignments(data, "--input")
        if self.data and not model_spec.endswith(".keras"):
            raise click.UsageError("--input gives the data of a .keras MODEL; to change a model file's inputs use --set")
        self.rng_seed = rng_seed
        self.save = save
        _check_save(save)

    def load(self):
        start_tensorflow()
        from gradcli.model.loading import load_model

        return load_model(
            self.spec, wrt=self.wrt, overrides=self.overrides, rng_seed=self.rng_seed, data=self.data
        )

    def finish(self, command: str, result, as_json: bool, render) -> int:
        if as_json:
            from gradcli.render.inspect_json import inspect_document

            emit_json(inspect_document(command, result))
        else:
            render(result, text_console())
        if self.save:
            save_arrays(self.save, result.arrays())
        return 0


def save_arrays(path: str, arrays: dict) -> None:
    import numpy as np

    try:
        np.savez(path, **arrays)
    except OSError as exc:
        raise click.FileError(path, hint=exc.strerror or str(exc)) from None
    noun = "array" if len(arrays) == 1 else "arrays"
    click.echo(f"saved {len(arrays)} {noun} to {path} (keys: {', '.join(arrays) or 'none'})", err=True)


@click.command()
@inspect_options
def forward(model_spec, wrt, overrides, rng_seed, data, as_json, save):
    """Each output's shape, dtype and values at the model's point.

    Inputs are handled as by `gradcli check` (promoted to float64). Large
    outputs are summarised (shape, min/max/mean/norm, first entries).
    """
    call = _Call(model_spec, wrt, overrides, rng_seed, data, save)
    model = call.load()
    from gradcli.analyses import inspection as inspect
    from gradcli.render.inspect_text import render_forward

    return call.finish("forward", inspect.forward(model), as_json, render_forward)


@click.command()
@inspect_options
@click.option("--cotangent", "cotangents", multiple=True, metavar="OUTPUT=VALUE", help="Seed (grad_ys / output_gradients) for an output; outputs without one get zeros. Default: ones for every output.")
@numeric_option
def vjp(model_spec, wrt, overrides, rng_seed, data, as_json, save, cotangents, numeric):
    """Vector-Jacobian product J^T c for each --wrt input, summed over outputs.

    With no --cotangent every output is seeded with ones: what
    tf.gradients(ys, xs) returns. For a Keras model the default --wrt is every
    trainable weight, and a table of per-weight gradient norms flags
    vanishing or exploding gradients.
    """
    from gradcli.model.values import parse_assignments

    call = _Call(model_spec, wrt, overrides, rng_seed, data, save)
    seeds = parse_assignments(cotangents, "--cotangent")
    model = call.load()
    from gradcli.analyses import inspection as inspect
    from gradcli.render.inspect_text import render_vjp

    return call.finish("vjp", inspect.vjp(model, seeds, numeric=numeric), as_json, render_vjp)


@click.command()
@inspect_options
@click.option("--tangent", "tangents", multiple=True, metavar="INPUT=VALUE", help="Tangent (direction) of an input; inputs without one get zeros. At least one.")
@numeric_option
def jvp(model_spec, wrt, overrides, rng_seed, data, as_json, save, tangents, numeric):
    """Jacobian-vector product J t for every output (forward mode)."""
    from gradcli.model.values import parse_assignments

    call = _Call(model_spec, wrt, overrides, rng_seed, data, save)
    given = parse_assignments(tangents, "--tangent")
    if not given:
        raise click.UsageError("jvp needs at least one --tangent INPUT=VALUE")
    model = call.load()
    from gradcli.analyses import inspection as inspect
    from gradcli.render.inspect_text import render_jvp

    return call.finish("jvp", inspect.jvp(model, given, numeric=numeric), as_json, render_jvp)


@click.command()
@inspect_options
@click.option("--of", "of", multiple=True, metavar="OUTPUTS", help="Outputs to differentiate (comma-separated or repeated). Default: every floating output.")
@click.option("--mode", type=click.Choice(["auto", "reverse", "forward"]), default="auto", show_default=True, help="auto: whichever needs fewer vectorised passes.")
@numeric_option
def jacobian(model_spec, wrt, overrides, rng_seed, data, as_json, save, of, mode, numeric):
    """Full Jacobian of each output with respect to each --wrt input.

    Rows are output elements, columns input elements, labelled by their
    indices. Computed vectorised (pfor), in reverse or forward mode, whichever
    needs fewer passes. --save keys are OUTPUT/INPUT.
    """
    from gradcli.model.values import parse_names

    call = _Call(model_spec, wrt, overrides, rng_seed, data, save)
    outputs = parse_names(of)
    if numeric and mode != "auto":
        raise click.UsageError("--mode chooses between analytic modes; it cannot be combined with --numeric")
    model = call.load()
    from gradcli.analyses import inspection as inspect
    from gradcli.render.inspect_text import render_jacobian

    result = inspect.jacobian(model, outputs, numeric=numeric, mode=mode)
    return call.finish("jacobian", result, as_json, render_jacobian)
