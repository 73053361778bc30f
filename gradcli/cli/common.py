"""Pieces every command shares: model arguments, output options, TensorFlow start-up."""

from __future__ import annotations


import click


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


def configured_params(ctx: click.Context) -> tuple[dict, set[str]]:
    """The command's parameters with ``[tool.gradcli]`` defaults filled in.

    Returns ``(params, given)``: ``ctx.params`` where every option not given
    on the command line takes its value from the nearest pyproject.toml
    (``gradcli.config``; the MODEL arguments from ``paths``), cast and
    validated by the option's own click type; and the names of the parameters
    given on the command line. A key no command knows, or a value of the wrong
    type, is a one-line usage error naming the file, table and key.
    """
    from click.core import ParameterSource

    from gradcli.config import load_project_config
    from gradcli.errors import UsageError

    params = dict(ctx.params)
    given = {
        name for name in params
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    config = load_project_config()
    if config.path is None:
        return params, given
    command = ctx.command.name
    group = ctx.parent.command if ctx.parent is not None else None
    commands = getattr(group, "commands", {command: ctx.command})
    for table in config.commands:
        if table not in commands:
            raise UsageError(
                f"{config.where(table)}: unknown command table (commands: {', '.join(sorted(commands))})"
            )
    ours = _config_keys(ctx.command)
    known_anywhere = set().union(*(_config_keys(c) for c in commands.values()))
    for key, value in config.for_command(command).items():
        param = ours.get(key)
        if param is None:
            if key in known_anywhere and key not in config.commands.get(command, {}):
                continue  # a shared key for another command
            raise UsageError(
                f"{config.where(key, command)}: not an option of gradcli {command} "
                f"(known: {', '.join(sorted(k.replace('_', '-') for k in ours))})"
            )
        if param.name in given:
            continue
        if (param.multiple or param.nargs == -1) and isinstance(value, str):
            value = [value]
        try:
            params[param.name] = param.type_cast_value(ctx, value)
        except (click.BadParameter, TypeError) as exc:
            message = exc.message if isinstance(exc, click.BadParameter) else str(exc)
            raise UsageError(f"{config.where(key, command)}: {message}") from None
    return params, given


def _config_keys(command: click.Command) -> dict:
    """Config key -> parameter: long option names without dashes (``rng_seed``),
    and ``paths`` for the command's variadic argument."""
    keys = {}
    for param in command.params:
        if not param.expose_value:
            continue
        if isinstance(param, click.Argument):
            keys["paths"] = param
            continue
        for opt in param.opts + param.secondary_opts:
            if opt.startswith("--"):
                keys[opt[2:].replace("-", "_")] = param
    return keys


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
