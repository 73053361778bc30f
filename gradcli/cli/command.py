"""What every command does around its own computation, in one place.

A gradcli command is a click command of class ``GradcliCommand`` whose callback
takes the parsed parameters and returns a result object (``gradcli.results``).
``GradcliCommand.invoke`` then does the same for every command:

1. fills in ``[tool.gradcli]`` and ``[tool.gradcli.<command>]`` defaults for
   every option not given on the command line, with the same precedence and the
   same errors for unknown keys and wrong types (``settings.configured_params``; which
   file: ``gradcli.config``, ``--config``, ``--isolated``); ``--show-config``
   prints the result and stops here;
2. has output paths checked before any model runs (``options.OutputPath``);
3. runs the callback (which parses values first, then imports the library and
   with it TensorFlow, quietly: ``--help`` and usage errors never import it) with the model's stdout sent to stderr, so a ``print`` in
   a model file cannot corrupt the report or the JSON document;
4. renders the result (``--json``: the one envelope of ``gradcli.render.json``;
   ``--format NAME``: that renderer; else the command's text renderer), writes the output files, and returns the
   exit code the result decides (``gradcli.results.outcome``). Every report write is checked and
   report files are replaced whole; Ctrl-C and SIGTERM still write the finished part, marked
   interrupted (``gradcli.cli.reports``).

A ``UsageError`` or ``ModelError`` from the library still gets its JSON
document (``ok: false`` and the message) and its JUnit file before the error
line; the exit code is the error's.
"""

from __future__ import annotations

import contextlib
import sys

import click

from gradcli.cli.options import COLOR, SHOW_CONFIG, VERBOSITY, config_options, output_level_options
from gradcli.cli.settings import GIVEN, configured_params, flag_of
from gradcli.errors import GradcliError, UsageError, spell_texts

class GradcliCommand(click.Command):
    """``render``: "module:function" drawing the result as text on a rich
    console; ``render_params``: parameters it also takes (``quiet``);
    ``formats``: other ``--format`` choices -> their "module:function";
    ``implied``: options fields no flag sets but one implies -> that flag's
    parameter (``gradcli hessian --plot`` draws the slice: ``slice`` -> ``plot``)."""

    def __init__(self, *args, render: str, render_params=(), formats=None, implied=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.implied = dict(implied or {})
        self.render = render
        self.render_params = tuple(render_params)
        self.formats = {"text": render, **(formats or {})}
        config_options(self)
        output_level_options(self)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """With ``--show-config``, a missing MODEL is no error: only the settings are shown."""
        if "--show-config" not in args[:args.index("--") if "--" in args else None]:
            return super().parse_args(ctx, args)
        required = [param for param in self.params if param.required]
        for param in required:
            param.required = False
        try:
            return super().parse_args(ctx, args)
        finally:
            for param in required:
                param.required = True

    def invoke(self, ctx: click.Context) -> int:
        params, given = configured_params(ctx)
        if ctx.meta.get(SHOW_CONFIG):
            from gradcli.cli.show_config import describe

            click.echo(describe(ctx, params))
            return 0
        if params.get("output_format") == "json":
            params["as_json"] = True  # --json is the shorthand of --format json
        elif params.get("as_json") and params.get("output_format") not in (None, "text"):
            raise click.UsageError(f"--json and --format {params['output_format']}: choose one", ctx=ctx)
        ctx.params = params
        ctx.meta[GIVEN] = given
        ctx.meta[VERBOSITY] = -1 if params.get("quiet") else int(params.get("verbose") or 0)
        ctx.meta[COLOR] = params.get("color")
        from gradcli.cli.reports import Reports
        from gradcli.tf_import import keep_out_of_home

        keep_out_of_home()  # before a model file or gradcli imports Keras, here or in a worker
        reports = Reports(self.name, params, {p.name for p in self.params})
        with reports.interruptible():
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    result = ctx.invoke(self.callback, **_accepted(self.callback, params))
            except GradcliError as error:
                if error.names_parameters:
                    error = _about_flag(ctx, error)
                self.finish_error(ctx, reports, error)
                raise error from None
            except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM (Reports.interruptible)
                stopped = reports.stopped()
                with reports.finishing():
                    partial = getattr(interrupt, "result", None)  # a batch's finished models
                    if partial is not None:
                        self.emit(ctx, reports, partial, stopped)
                    else:
                        self.finish_error(ctx, reports, stopped)
                raise stopped from None
            self.emit(ctx, reports, result)
        return result.exit_code

    def emit(self, ctx, reports, result, stopped=None) -> None:
        """stdout's report and the report files (``stopped``: of the part an
        interrupted run finished, marked as interrupted); then one line per
        model error, or the one line of a report that could not be written."""
        from gradcli.render.files import ON_INTERRUPT, WRITERS

        _spell_model_errors(ctx, result)
        params = ctx.params
        if params.get("as_json"):
            from gradcli.render.json import document, dumps

            reports.stdout(lambda: dumps(document(self.name, result, stopped)) + "\n")
        else:
            extra = {name: params[name] for name in self.render_params}
            renderer = _function(self.formats[params.get("output_format") or "text"])
            if "verbosity" in _parameters(renderer):
                extra["verbosity"] = ctx.meta.get(VERBOSITY, 0)
            if stopped is not None and "interrupted" in _parameters(renderer):
                extra["interrupted"] = True  # the models not run were stopped, not skipped
            annotation = stopped is not None and params.get("output_format") == "github"
            if stopped is None:
                _write_witnesses(self.name, result, reports)
            color = ctx.meta.get(COLOR)
            reports.stdout(lambda: _rendered(renderer, result, extra, color)
                           + (_annotation(self.name, stopped) if annotation else ""))
        for name, writer in WRITERS.items():
            if params.get(name) and (stopped is None or name in ON_INTERRUPT):
                more = {} if stopped is None else {"error": stopped}
                reports.file(name, lambda: writer(params[name], self.name, result, **more))
        if stopped is not None:
            reports.finish(stopped)
            return
        reports.finish()
        for message in getattr(result, "error_messages", ()):
            click.echo(f"Error: {message}", err=True)

    def finish_error(self, ctx, reports, error) -> None:
        """The JSON document (or GitHub annotation) and the JUnit file of a run
        that could not finish (an error, or interrupted before any result)."""
        params = ctx.params
        if params.get("as_json"):
            from gradcli.render.json import document, dumps

            reports.stdout(lambda: dumps(document(self.name, error=error)) + "\n")
        elif params.get("output_format") == "github":
            reports.stdout(lambda: _annotation(self.name, error))
        if params.get("junit_xml"):
            from gradcli.render.files import junit_xml

            model = params.get("model") or ", ".join(params.get("models") or ())
            reports.file("junit_xml", lambda: junit_xml(params["junit_xml"], self.name, error=error, model=model))
        reports.finish(error)


def _rendered(renderer, result, extra, color=None) -> str:
    """The text report as one string, drawn on stdout's console (its colours
    and width; ``color``: ``--color/--no-color``)."""
    from gradcli.render.formatting import console

    out = console(color=color)
    with out.capture() as captured:
        renderer(result, out, **extra)
    return captured.get()


def _parameters(function) -> set[str]:
    """The names ``function`` takes by name (not its ``**kwargs``)."""
    import inspect

    return {
        name for name, p in inspect.signature(function).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


#: Parameters every command has (``output_level_options``) that reach a
#: callback only when it names them.
_SHARED = ("verbose", "quiet", "color")


def _accepted(callback, params: dict) -> dict:
    names = _parameters(callback)
    return {k: v for k, v in params.items() if k not in _SHARED or k in names}


def _write_witnesses(command: str, result, reports) -> None:
    """The ``.npz`` file of a witness too large to print (``gradcli.render.witness``),
    before the report that names it; a file that cannot be written is the run's error line."""
    from gradcli.render.witness import save_witnesses, witness_path, witnesses

    try:
        lines = save_witnesses(command, result)
    except OSError as exc:
        names = ", ".join(witness_path(path) for path, _ in witnesses(command, result))
        reports.failures.append(f"cannot write {names}: {exc.strerror or exc}")
        return
    for line in lines:
        click.echo(line, err=True)


def _annotation(command: str, error) -> str:
    from gradcli.render.github import error_annotation

    message = error.format_message() if hasattr(error, "format_message") else str(error)
    return error_annotation(command, message) + "\n"


def _function(spec: str):
    """A renderer named ``"module:function"``, imported only when it draws."""
    from gradcli.workers.batch import resolve

    return resolve(spec)


def _spell_model_errors(ctx: click.Context, result) -> None:
    """The messages a result holds (a model's error row, notes, warnings) name
    parameters as ``{@name}``: here they name the flags the user types, as the
    command's own errors do (``_about_flag``)."""
    spell_texts(result, lambda name: flag_of(ctx, name))


def _about_flag(ctx: click.Context, error: GradcliError):
    """A library error about a parameter, told in the terms the user typed:
    ``Invalid value for '--rtol': ...``, or the pyproject.toml key that set it.
    A message that names parameters only inside (``{@wrt}: unknown input``),
    or a ``ModelError`` (``needs {@numeric}``), stays one line with the flags
    spelled in, and its exit code."""
    message = error.message(lambda name: flag_of(ctx, name))
    if not isinstance(error, UsageError):
        spelled = GradcliError(message)
        spelled.exit_code = error.exit_code
        return spelled
    if error.param is None:
        return UsageError(message)
    flag = flag_of(ctx, error.param)
    if not flag.startswith("--"):  # set in pyproject.toml: the message names the key
        return UsageError(message)
    if error.bad_value:
        # quoted as click quotes the flags of its own type errors ('--mode', '--probes')
        return click.BadParameter(message[len(flag) + 1:], ctx=ctx, param_hint=f"'{flag}'")
    return click.UsageError(message, ctx=ctx)


def command(render: str, render_params=(), formats=None, implied=None, **kwargs):
    """``@command("gradcli.render.text:render_check")``: a ``GradcliCommand``."""
    return click.command(cls=GradcliCommand, render=render, render_params=render_params, formats=formats,
                         implied=implied, **kwargs)
