"""Which settings a command runs with: ``[tool.gradcli]`` defaults filled in
for every option not given on the command line, and the flag or key that set
each one, for error messages.

``configured_params`` is the one resolution rule; the command line
(``GradcliCommand.invoke``), ``--show-config`` and the pytest plugin
(``settings_without_flags``) all read settings through it.
"""

from __future__ import annotations

import click
from click.core import ParameterSource

from gradcli.cli.options import CONFIG_CHOICE
from gradcli.errors import UsageError

#: ctx.meta keys: names of the parameters given on the command line; and
#: parameter -> where [tool.gradcli] set it, for error messages.
GIVEN = "gradcli.given"
FROM_CONFIG = "gradcli.from_config"
#: ctx.meta key: the ``gradcli.config.ProjectConfig`` the command read.
CONFIG = "gradcli.config"


def flag_of(ctx: click.Context, field: str) -> str:
    """The flag that sets an options-dataclass field, which is named as its
    option (``native_dtype`` -> ``--native-dtype``, ``imports`` -> ``--import``),
    or the configuration key that set it; for a field this command has no
    option for (``input`` in ``gradcli hessian``), the flag of the other
    commands that set it (``--input``)."""
    names = {field, getattr(ctx.command, "implied", {}).get(field)}
    for param in ctx.command.params:
        if param.name in names and isinstance(param, click.Option):
            return ctx.meta.get(FROM_CONFIG, {}).get(param.name) or param.opts[0]
    for command in getattr(ctx.find_root().command, "commands", {}).values():
        for param in command.params:
            if param.name in names and isinstance(param, click.Option):
                return param.opts[0]
    return field


def given_params(ctx: click.Context | None = None) -> set[str]:
    ctx = ctx or click.get_current_context()
    return ctx.meta.get(GIVEN, set())


def configured_params(ctx: click.Context) -> tuple[dict, set[str]]:
    """The command's parameters with ``[tool.gradcli]`` defaults filled in.

    Returns ``(params, given)``: ``ctx.params`` where every option not given
    on the command line takes its value from the configuration
    (``gradcli.config``, as ``ctx.meta[CONFIG_CHOICE]`` asks; the MODEL
    arguments from ``paths``), cast and
    validated by the option's own click type; and the names of the parameters
    given on the command line. A key no command knows, or a value of the wrong
    type, is a one-line usage error naming the file, table and key.
    """
    from gradcli.config import load_project_config

    params = dict(ctx.params)
    given = {
        name for name in params
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    choice = ctx.meta.get(CONFIG_CHOICE, {})
    if choice.get("config_file") and choice.get("isolated"):
        raise click.UsageError("--config and --isolated: choose one", ctx=ctx)
    config = ctx.meta[CONFIG] = load_project_config(**choice)
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
    ours = config_keys(ctx.command)
    known_anywhere = set().union(*(config_keys(c) for c in commands.values()))
    for key, value in config.for_command(command).items():
        param = ours.get(key)
        if param is None:
            if key in known_anywhere and key not in config.commands.get(command, {}):
                continue  # a shared key for another command
            raise UsageError(
                f"{config.where(key, command)}: not an option of gradcli {command}"
                f"{did_you_mean(key, set(ours) | known_anywhere)} "
                f"(known: {', '.join(sorted(k.replace('_', '-') for k in ours))})"
            )
        if param.name in given:
            continue
        if (param.multiple or param.nargs == -1) and isinstance(value, str):
            value = [value]
        if param.nargs == 1 and not param.multiple and isinstance(value, (list, dict)):
            raise UsageError(f"{config.where(key, command)}: must be a single value, got {value!r}")
        try:
            params[param.name] = param.type_cast_value(ctx, value)
        except (click.BadParameter, TypeError) as exc:
            message = exc.message if isinstance(exc, click.BadParameter) else str(exc)
            raise UsageError(f"{config.where(key, command)}: {message}") from None
        ctx.meta.setdefault(FROM_CONFIG, {})[param.name] = config.where(key, command) + ":"
    return params, given


def did_you_mean(key: str, known) -> str:
    """``; did you mean 'rtol'?`` for a key close to a known one (difflib's
    ratio >= 0.6, as click suggests options), else ""."""
    import difflib

    spelled = {k.replace("-", "_"): k for k in known}
    close = difflib.get_close_matches(key.replace("-", "_"), list(spelled), n=1, cutoff=0.6)
    return f"; did you mean '{spelled[close[0]]}'?" if close else ""


def config_keys(command: click.Command) -> dict:
    """Config key -> parameter: long option names without dashes (``rng_seed``),
    and ``paths`` for the [MODEL]... of a command that takes a batch."""
    keys = {}
    for param in command.params:
        if not param.expose_value:
            continue
        if isinstance(param, click.Argument):
            if param.nargs == -1:  # a batch of models: `paths`
                keys["paths"] = param
            continue
        for opt in param.opts + param.secondary_opts:
            if opt.startswith("--"):
                keys[opt[2:].replace("-", "_")] = param
    return keys


def settings_without_flags(group: click.Group, command_name: str, choice: dict):
    """What ``gradcli COMMAND`` (a command of ``group``, the ``gradcli`` group)
    would run with given no flags at all (the pytest plugin's case):
    ``(params, given, spell)``, where ``spell(field)`` names a parameter as the
    configuration file that set it spells it."""
    command = group.commands[command_name]
    ctx = command.make_context(command_name, [], parent=click.Context(group, info_name="gradcli"))
    ctx.meta[CONFIG_CHOICE] = choice
    params, given = configured_params(ctx)
    return params, given, lambda field: flag_of(ctx, field)
