"""``--show-config``: the settings a command would run with, and where each comes from.

One line per option, spelled as a configuration key, with its value and its
source: the command line, the configuration file's table and key, or the
default. The first line names the configuration file read (or why none was);
``gradcli.config`` says how it is found.
"""

from __future__ import annotations

import json

import click
from click.core import ParameterSource

from gradcli.cli.settings import CONFIG, FROM_CONFIG
from gradcli.cli.options import CONFIG_CHOICE


def describe(ctx: click.Context, params: dict) -> str:
    """The settings of ``ctx``'s command with ``params`` (configuration applied)."""
    from gradcli.model.paths import relative_path

    config = ctx.meta[CONFIG]
    choice = ctx.meta.get(CONFIG_CHOICE, {})
    if choice.get("isolated"):
        origin = "none (--isolated)"
    elif config.path is None:
        origin = config.origin
    else:
        table = f" [{config.table}]" if config.table else ""
        how = "--config" if choice.get("config_file") else config.origin
        origin = f"{relative_path(config.path)}{table} ({how})"
    rows = [(key, _value(params.get(param.name)), _source(ctx, param)) for key, param in _settings(ctx.command)]
    width = max(len(f"{key} = {value}") for key, value, _ in rows)
    lines = [f"# gradcli {ctx.command.name}: settings in force", f"# configuration: {origin}"]
    if ctx.command.name == "check":
        lines.append("# a model file's `check` dict may still set its own per-model options")
    lines += [f"{f'{key} = {value}':<{width}}  # {source}" for key, value, source in rows]
    return "\n".join(lines)


def _settings(command: click.Command):
    """``(key, parameter)`` for every option a configuration can set, in the
    order of ``--help``; ``paths`` for the MODEL arguments of a batch."""
    for param in command.params:
        if not param.expose_value:
            continue
        if isinstance(param, click.Argument):
            if param.nargs == -1:
                yield "paths", param
            continue
        long = next((opt for opt in param.opts if opt.startswith("--")), None)
        if long is not None:
            yield long[2:], param


def _source(ctx: click.Context, param: click.Parameter) -> str:
    source = ctx.get_parameter_source(param.name)
    if source == ParameterSource.COMMANDLINE:
        return "command line"
    if source == ParameterSource.ENVIRONMENT:
        return "environment"
    where = ctx.meta.get(FROM_CONFIG, {}).get(param.name)
    return where.rstrip(":") if where else "default"


def _value(value) -> str:
    """A value as TOML would write it (unset: ``(not set)``)."""
    if value is None:
        return "(not set)"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, (bool, str)):
        return json.dumps(value)
    return repr(value)
