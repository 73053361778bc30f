"""Pieces every command shares: model arguments, output options, TensorFlow start-up."""

from __future__ import annotations

import os

import click


def expand_models(paths) -> list[str]:
    """Folders stand for the `*.py` files in them, sorted."""
    specs = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(path, f)
                for f in os.listdir(path)
                if f.endswith(".py") and not f.startswith("_")
            )
            if not found:
                raise click.UsageError(f"no *.py model files in folder {path}")
            specs.extend(found)
        else:
            specs.append(path)
    return specs


def start_tensorflow() -> None:
    """Import TensorFlow quietly; call after options are parsed and validated."""
    from gradcli.tf_import import import_tensorflow

    import_tensorflow()


def emit_json(document: dict) -> None:
    from gradcli.render.json import dumps

    click.echo(dumps(document))


def text_console():
    from gradcli.render.text import console

    return console()


def model_options(command):
    """The options that say how a model is loaded, shared by every command that
    loads one: ``--wrt`` (-> ``wrt``), ``--set`` (-> ``overrides``), ``--rng-seed``."""
    options = [
        click.option("--wrt", multiple=True, metavar="NAMES", help="Inputs to differentiate (comma-separated or repeated). Default: every floating input; Keras: every trainable weight."),
        click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE", help="Override an input: JSON literal, @file.npy or @file.npz:key."),
        click.option("--rng-seed", type=int, default=0, show_default=True, help="Seed for every random choice (inputs, probes, weights)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
