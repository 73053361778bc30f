"""``gradcli forward``, ``vjp``, ``jvp`` and ``jacobian``: show derivatives as numbers.

Each command parses its values (numpy only), then loads the model and calls
``gradcli.analyses.inspection`` in a supervised worker (which imports
TensorFlow; ``gradcli.workers.batch.run_isolated``) and returns the result; the
command layer renders it and, with ``--save``, writes its arrays to an ``.npz``
file whose keys the next call can read as ``@FILE.npz:KEY``.
"""

from __future__ import annotations

import click

from gradcli.cli.command import command
from gradcli.cli.options import (
    json_option, max_memory_option, model_argument, model_options,
    native_dtype_option, numeric_option, plot_option, save_option, saved_model_options,
)


def inspect_options(command):
    """MODEL, the model-loading options, ``--input``/``--import``/``--loss``, ``--native-dtype``, ``--json``
    and ``--save``."""
    options = [
        model_argument(),
        model_options,
        saved_model_options,
        native_dtype_option,
        json_option,
        save_option("Save the result arrays, keyed by name, for @FILE.npz:KEY."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def inspect(what: str, load_options: dict, *args, **keywords):
    """Parse the loading options (usage errors before TensorFlow), then load the
    model and run the analysis ``what`` in a supervised worker, which imports
    TensorFlow (``gradcli.workers.batch.run_isolated``). ``--native-dtype``
    keeps a float32 network in float32, so its gradients (and a Keras model's
    per-weight gradient norms) are the ones training sees."""
    from gradcli.workers.batch import run_isolated
    from gradcli.model.values import parse_assignments, parse_names
    from gradcli.options import LoadOptions

    model = load_options["model"]
    options = LoadOptions(
        wrt=parse_names(load_options["wrt"]),
        set=parse_assignments(load_options["set"], "--set"),
        rng_seed=load_options["rng_seed"], input=parse_assignments(load_options["input"], "--input"),
        imports=list(load_options["imports"]), loss=load_options["loss"],
        native_dtype=load_options["native_dtype"],
    )
    return run_isolated(
        "gradcli.analyses.inspection:inspect_path", model, what, model, options, args, keywords
    )


@command("gradcli.render.inspect_text:render_forward")
@inspect_options
def forward(as_json, save, **load_options):
    """Each output's shape, dtype and values at the model's point.

    Inputs are handled as by `gradcli check` (promoted to float64). Large
    outputs are summarised (shape, min/max/mean/norm, first entries).

    \b
    Example:
      gradcli forward sample_models/two_by_two.py
    """
    return inspect("forward", load_options)


@command("gradcli.render.inspect_text:render_vjp")
@inspect_options
@click.option("--cotangent", "cotangents", multiple=True, metavar="OUTPUT=VALUE", help="Seed (grad_ys / output_gradients) for an output; outputs without one get zeros. Default: ones for every output.")
@numeric_option
@max_memory_option
def vjp(as_json, save, cotangents, numeric, max_memory, **load_options):
    """Vector-Jacobian product J^T c for each --wrt input, summed over outputs.

    With no --cotangent every output is seeded with ones: what
    tf.gradients(ys, xs) returns. For a Keras model the default --wrt is its
    data inputs and every trainable weight, and a table of per-weight
    gradient norms flags vanishing or exploding gradients.

    \b
    Example:
      gradcli vjp sample_models/two_by_two.py --cotangent 'output=[1, 0]'
    """
    from gradcli.model.values import parse_assignments

    seeds = parse_assignments(cotangents, "--cotangent")
    return inspect("vjp", load_options, seeds, numeric=numeric, max_memory=max_memory)


@command("gradcli.render.inspect_text:render_jvp")
@inspect_options
@click.option("--tangent", "tangents", multiple=True, metavar="INPUT=VALUE", help="Tangent (direction) of an input; inputs without one get zeros. At least one.")
@numeric_option
@max_memory_option
def jvp(as_json, save, tangents, numeric, max_memory, **load_options):
    """Jacobian-vector product J t for every output (forward mode).

    \b
    Example:
      gradcli jvp sample_models/two_by_two.py --tangent 'x=[1, 0]'
    """
    from gradcli.model.values import parse_assignments

    given = parse_assignments(tangents, "--tangent")
    if not given:
        raise click.UsageError("jvp needs at least one --tangent INPUT=VALUE")
    return inspect("jvp", load_options, given, numeric=numeric, max_memory=max_memory)


@command("gradcli.render.inspect_text:render_jacobian")
@inspect_options
@click.option("--of", "of", multiple=True, metavar="OUTPUTS", help="Outputs to differentiate (comma-separated or repeated). Default: every floating output.")
@click.option("--mode", type=click.Choice(["auto", "reverse", "forward"]), default="auto", show_default=True, help="auto: whichever needs fewer vectorised passes.")
@numeric_option
@max_memory_option
@plot_option("Draw each block as a heat map (needs matplotlib): for Jacobians too large to print.")
def jacobian(as_json, save, of, mode, numeric, max_memory, plot, **load_options):
    """Full Jacobian of each output with respect to each --wrt input.

    Rows are output elements, columns input elements, labelled by their
    indices. Computed vectorised (pfor), in reverse or forward mode, whichever
    needs fewer passes. --save keys are OUTPUT/INPUT.

    \b
    Example:
      gradcli jacobian sample_models/two_by_two.py --save jac.npz
    """
    from gradcli.model.values import parse_names

    outputs = parse_names(of)
    if numeric and mode != "auto":
        raise click.UsageError("--mode chooses between analytic modes; it cannot be combined with --numeric")
    return inspect("jacobian", load_options, outputs, numeric=numeric, mode=mode, max_memory=max_memory)
