"""The command line: parse options, call the library, render, choose the exit code.

Exit codes (``gradcli.errors``): 0 every check passed; 1 a check found a
problem; 2 bad usage; 3 the model could not be loaded, run or checked; 130
interrupted. Every command is a ``GradcliCommand`` (``gradcli.cli.command``),
which reads configuration, checks output paths, renders and picks the exit code
the same way for all; TensorFlow is imported only once options are parsed, so
``--help`` and usage errors stay fast.

Errors are one line on stderr. An exception that is not a ``GradcliError`` is
a bug in gradcli: it is reported as ``internal error`` (exit 3), with the
traceback only when asked for (``gradcli --debug`` or ``GRADCLI_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys

import click

from gradcli import __version__
from gradcli.cli.check import check
from gradcli.cli.hessian import hessian
from gradcli.cli.inspection import forward, jacobian, jvp, vjp
from gradcli.cli.logdet import logdet
from gradcli.errors import (
    DEBUG_VARIABLE, EXIT_INTERRUPTED, EXIT_MODEL, EXIT_USAGE, GradcliError, debugging,
    internal_error_message,
)


def _debug_requested(args) -> tuple[bool, list]:
    """``--debug`` anywhere on the command line (``gradcli --debug check ...``
    or ``gradcli check ... --debug``, as the internal-error message says), read
    before parsing so parse errors honour it too; returns it and the arguments
    without it."""
    args = list(sys.argv[1:] if args is None else args)
    if "--debug" in args:
        os.environ[DEBUG_VARIABLE] = "1"  # the library reads it (a batch's internal errors)
        args = [a for a in args if a != "--debug"]
    return debugging(), args


class GradcliGroup(click.Group):
    """Prints every error as one line on stderr, never a traceback (unless debugging)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        debug, args = _debug_requested(args)
        try:
            code = super().main(
                args=args, prog_name=prog_name or "gradcli", complete_var=complete_var,
                standalone_mode=False, **extra,
            )
        except click.exceptions.NoArgsIsHelpError as exc:
            _say(exc.ctx.get_help() if exc.ctx else str(exc))
            code = EXIT_USAGE
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            _say(f"Error: {exc.format_message()}{hint}")
            code = EXIT_USAGE
        except click.ClickException as exc:
            _say(f"Error: {exc.format_message()}")
            code = exc.exit_code
        except GradcliError as exc:
            _say(f"Error: {exc}")
            code = exc.exit_code
        except (click.exceptions.Abort, KeyboardInterrupt):
            _say("Error: interrupted")
            code = EXIT_INTERRUPTED
        except (Exception, GeneratorExit) as exc:
            if debug:
                raise
            if isinstance(exc, OSError) and _writing_failed(exc):
                code = _stream_error(exc)
            else:  # a bug in gradcli: say so in one line
                _say(f"Error: {internal_error_message(exc)}")
                code = EXIT_MODEL
        if not standalone_mode:
            return code
        sys.exit(code or 0)


def _exit(code: int) -> None:
    """End the program with ``code``. Once TensorFlow is imported in this
    process (a check run in it: ``GRADCLI_IN_PROCESS``), without the
    interpreter's finalization (``end_process``): stdout is flushed first,
    and a stdout that fails now is the failed write it is (exit 3, as during
    the run)."""
    if "tensorflow" not in sys.modules:
        sys.exit(code)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as exc:
        code = _stream_error(exc) if _writing_failed(exc) else EXIT_MODEL
    except ValueError:  # closed by the model: nothing to flush
        pass
    end_process(code)


def end_process(code: int) -> None:
    """End this process with ``code`` once what an exit does for the work is
    done: the atexit handlers run (logging's flush, the ending of any worker
    still running and the removal of its folder) and stdout and stderr are
    flushed. The interpreter's finalization that ``sys.exit`` would run next
    is TensorFlow's teardown, with nothing of the work left for it: 0.8-0.9 s
    of a command that checked in its own process (square.py: 3.46 -> 2.56 s,
    median of 8 paired runs), seconds in a test worker after hundreds of
    checks (``tests/conftest.py``)."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _say(line: str) -> None:
    """The one error line on stderr; a stderr that is closed or broken loses
    it, and the exit code alone tells."""
    try:
        click.echo(line, err=True)
    except OSError:
        try:  # what is left in stderr's buffer would fail again at exit
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
        except OSError:
            pass


def _writing_failed(exc: OSError) -> bool:
    import errno

    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.ENOSPC, errno.EIO)


def _stream_error(exc: OSError) -> int:
    """stdout closed or full (``> /dev/full``, a pipe whose reader left): the
    report was not delivered, so the run did not do its job (exit 3)."""
    try:
        sys.stdout = open(os.devnull, "w")  # nothing more to flush at exit
    except OSError:
        pass
    try:
        click.echo(f"Error: cannot write the report: {exc.strerror or exc}", err=True)
    except OSError:
        pass
    return EXIT_MODEL


@click.group(cls=GradcliGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradcli")
@click.option("--debug", is_flag=True, help="Show the traceback of an internal error (or set GRADCLI_DEBUG=1).")
def cli(debug):
    """Check and inspect gradients of TensorFlow models.

    A MODEL is a Python file that defines `model` and `inputs` (docs:
    model-files); gradcli imports it, which runs its code.

    \b
    Example:
      gradcli check sample_models/square.py
    """


for _command in (check, hessian, logdet, forward, vjp, jvp, jacobian):
    cli.add_command(_command)


def main(args=None, prog_name="gradcli"):
    """The program (the console script ``gradcli``, ``python -m gradcli``): the
    command's exit code ends the process (``_exit``). A caller in its own
    process (click's test runner, a script) calls ``cli.main`` instead."""
    _exit(cli.main(args=args, prog_name=prog_name, standalone_mode=False) or 0)
