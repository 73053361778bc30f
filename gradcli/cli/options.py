"""Options every command shares, declared once.

``model_options`` (``--wrt``, ``--set``, ``--rng-seed``), ``saved_model_options``
(``--input``, the data of a saved model, ``--import`` and ``--loss``), ``tolerance_options``,
``native_dtype_option``, ``json_option``, ``format_option`` and the output
options (``--save``, ``--junit-xml``, ``--plot``, ``--summary``) are decorators; a command lists the ones that
apply to it. ``config_options`` (``--config``, ``--isolated``, ``--show-config``)
and ``output_level_options`` (``-v``, ``-q``, ``--color/--no-color``) every
command has: ``GradcliCommand`` adds them, since every command reads
configuration and prints a report. Values are only parsed here (click types); their rules live in
the analyses' options dataclasses (``gradcli.options``), so the Python API and
the command line reject the same values with the same words.
"""

from __future__ import annotations

import os

import click

from gradcli.render.writing import exists_but_not_regular


class OutputPath(click.ParamType):
    """A file gradcli will write: checked when the option is read, so a bad
    path is a usage error (exit 2) before any model runs, never a traceback
    after the work is done."""

    name = "path"

    def __init__(self, suffix: str | None = None, needs: str | None = None):
        self.suffix = suffix
        self.needs = needs  # a package the writer imports (an optional extra)

    def convert(self, value, param, ctx):
        import importlib.util

        path = os.fspath(value)
        flag = param.opts[0] if param is not None else "path"
        problem = problem_with_output(path, self.suffix)
        if not problem and self.needs and importlib.util.find_spec(self.needs) is None:
            problem = f"needs {self.needs}: pip install 'gradcli[plot]'"
        if problem:
            raise click.BadParameter(problem, ctx=ctx, param_hint=f"'{flag}'")
        return path


class Shard(click.ParamType):
    """``K/N``: shard K of N (1-based), as ``(K, N)``; ``gradcli.model.paths.shard_models``."""

    name = "K/N"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        index, slash, count = str(value).partition("/")
        try:
            parsed = int(index), int(count)
        except ValueError:
            parsed = None
        if not slash or parsed is None or not 1 <= parsed[0] <= parsed[1]:
            self.fail(f"{value!r} is not K/N with 1 <= K <= N (e.g. 2/4)", param, ctx)
        return parsed


def problem_with_output(path: str, suffix: str | None) -> str:
    if suffix and not path.endswith(suffix):
        return f"{path!r} must end in {suffix}"
    if os.path.isdir(path):
        return f"{path} is a folder"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"folder of {path} does not exist"
    try:
        in_place = exists_but_not_regular(path)  # /dev/stdout, a FIFO: written in place, nothing created beside it
    except OSError as exc:  # a link that loops, a folder that cannot be searched: the writer could not open it
        return f"{path} is not writable: {exc.strerror or exc}"
    if in_place:
        return "" if os.access(path, os.W_OK) else f"{path} is not writable"
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"{path} is not writable"
    return _cannot_create_beside(path)


def _cannot_create_beside(path: str) -> str:
    """Try what the writer will do (``gradcli.render.writing.replace_file``):
    create a temporary file in the target's folder, then remove it. Permission
    bits do not tell (root may write anywhere by them; /proc refuses new files
    whatever they say)."""
    import tempfile

    folder, name = os.path.split(os.path.realpath(path))
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    except OSError as exc:
        return f"{path} is not writable: cannot create a file in {folder} ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(temp)
    return ""


def _apply(command, options):
    for option in reversed(options):
        command = option(command)
    return command


def model_argument(command=None, *, many: bool = False):
    """MODEL (one), or [MODEL]... for commands that take a batch."""
    if many:
        return click.argument("models", nargs=-1, metavar="[MODEL]...")
    return click.argument("model", metavar="MODEL")


def model_options(command):
    """How a model is loaded: ``--wrt``, ``--set``, ``--rng-seed``."""
    return _apply(command, [
        click.option("--wrt", multiple=True, metavar="NAMES", help="Inputs to differentiate (comma-separated or repeated). Default: every floating input and every trainable weight (not a loss's targets y); the names given are exactly what is differentiated."),
        click.option("--set", "set", multiple=True, metavar="NAME=VALUE", help="Override an input: JSON literal, @file.npy or @file.npz:key."),
        click.option("--rng-seed", type=int, default=0, show_default=True, help="Seed for every random choice (inputs, weights, probes, samples); 0 to 2**32-1."),
    ])


def tolerance_options(what: str):
    def decorate(command):
        return _apply(command, [
            click.option("--rtol", type=float, default=None, help=f"Relative tolerance of {what} [default: 1e-6 in float64, 1e-3 in float32]."),
            click.option("--atol", type=float, default=None, help=f"Absolute tolerance of {what} [default: 1e-9 in float64, 1e-5 in float32]."),
        ])
    return decorate


input_option = click.option("--input", "input", multiple=True, metavar="NAME=VALUE", help="Data input of a .keras or SavedModel MODEL: JSON literal, @file.npy or @file.npz:key (a single-input model takes any NAME).")


def saved_model_options(command):
    """What a saved model needs: ``--input``, ``--import`` (-> ``imports``,
    config key ``imports``) and ``--loss``."""
    return _apply(command, [
        input_option,
        click.option("--import", "--imports", "imports", multiple=True, metavar="MODULE", help="Import MODULE (a module importable from the project folder, or a .py file) before loading MODEL, e.g. the one that registers a .keras model's custom layers (repeatable)."),
        click.option("--loss", default=None, metavar="compiled|NAME", help="Check the loss of a .keras MODEL with respect to its weights: compiled (the loss it was compiled with) or a Keras loss name; the targets come from --input y=VALUE, the model's data from the other --input values."),
    ])
native_dtype_option = click.option("--native-dtype", is_flag=True, help="Work in the model's own dtype instead of promoting to float64.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document (docs: reference/json).")


def format_option(*others: str):
    """``--format text|json|OTHER...`` (``--json`` stays the shorthand of json)."""
    choices = ["text", "json", *others]
    return click.option("--format", "output_format", type=click.Choice(choices), default="text", show_default=True, help=f"Report as {', '.join(choices)} (github: workflow commands that annotate the pull request).")


def summary_option(help: str):
    return click.option("--summary", type=OutputPath(), metavar="PATH", default=None, help=help)


def save_option(help: str):
    return click.option("--save", type=OutputPath(".npz"), metavar="FILE.npz", default=None, help=help)


def junit_option(help: str):
    return click.option("--junit-xml", type=OutputPath(), metavar="PATH", default=None, help=help)


def plot_option(help: str):
    return click.option("--plot", type=OutputPath(".png", needs="matplotlib"), metavar="FILE.png", default=None, help=help)


class MemorySize(click.ParamType):
    """A size such as ``2GB`` or ``512MiB`` (``gradcli.memory.parse_size``), in bytes."""

    name = "size"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        from gradcli.memory import parse_size

        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


max_memory_option = click.option("--max-memory", type=MemorySize(), default=None, metavar="SIZE", help="Stop before a dense Jacobian, Hessian or numeric block predicted to need more memory (e.g. 2GB, 512MiB) [default: half the available memory].")


#: ctx.meta keys: which configuration a command reads (``{"config_file": ...,
#: "isolated": ...}``, the arguments of ``gradcli.config.load_project_config``),
#: and whether it only shows it.
CONFIG_CHOICE = "gradcli.config_choice"
SHOW_CONFIG = "gradcli.show_config"


def _remember(key: str, name: str | None = None):
    def callback(ctx, param, value):
        if name is None:
            ctx.meta[key] = value
        elif value:
            ctx.meta.setdefault(key, {})[name] = value
    return callback


def config_options(command: click.Command) -> None:
    """Add ``--config FILE``, ``--isolated`` and ``--show-config`` to ``command``:
    kept in ``ctx.meta`` (``CONFIG_CHOICE``, ``SHOW_CONFIG``), not passed to its
    callback, and never configuration keys themselves."""
    command.params.extend([
        click.Option(["--config"], type=click.Path(exists=True, dir_okay=False), metavar="FILE", expose_value=False, callback=_remember(CONFIG_CHOICE, "config_file"), help="Read settings from FILE (a pyproject.toml with [tool.gradcli], or a TOML file holding that table's keys) instead of the nearest pyproject.toml (docs: reference/configuration)."),
        click.Option(["--isolated"], is_flag=True, expose_value=False, callback=_remember(CONFIG_CHOICE, "isolated"), help="Read no configuration file: built-in defaults and the command line only."),
        click.Option(["--show-config"], is_flag=True, expose_value=False, callback=_remember(SHOW_CONFIG), help="Print the settings in force and where each comes from (a file, the command line or the default), then exit."),
    ])


#: ctx.meta keys: ``--color/--no-color`` (True, False or None: the environment
#: decides, NO_COLOR and FORCE_COLOR as rich reads them) and the report's
#: verbosity (``-v`` counts up, ``-q`` is -1).
COLOR = "gradcli.color"
VERBOSITY = "gradcli.verbosity"


def output_level_options(command: click.Command) -> None:
    """Add ``-v/--verbose`` (repeatable), ``-q/--quiet`` and ``--color/--no-color``
    to ``command`` unless it declares them itself (``check``'s ``-q`` also keeps
    passing models out of the report). They are configuration keys like any
    option (``verbose = 1``, ``quiet = true``, ``color = false``); the command
    layer takes them out of the callback's parameters unless it names them."""
    have = {name for param in command.params for name in param.opts + param.secondary_opts}
    wanted = [
        click.Option(["-v", "--verbose"], count=True, help="More detail: notes that need no decision (e.g. which mode auto chose); repeatable."),
        click.Option(["-q", "--quiet"], is_flag=True, help="Less output: no notes and no progress bar."),
        click.Option(["--color/--no-color"], default=None, help="Colour the report, or not [default: on a terminal, unless NO_COLOR is set; FORCE_COLOR turns it on]."),
    ]
    command.params.extend(o for o in wanted if not have & set(o.opts + o.secondary_opts))


def numeric_option(command):
    return click.option("--numeric", is_flag=True, help="Finite differences only, for models TensorFlow cannot differentiate (e.g. numpy code).")(command)
