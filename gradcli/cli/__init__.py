"""The command line: parse options, call the library, render, choose the exit code.

Exit codes: 0 every check passed; 1 a check found a problem; 2 bad usage;
3 the model could not be loaded, run or checked. Commands live in
``gradcli.cli`` and import TensorFlow only once their options are
parsed, so ``--help`` and usage errors stay fast.
"""

from __future__ import annotations

import sys

import click

from gradcli import __version__
from gradcli.cli.check import check
from gradcli.cli.hessian import hessian
from gradcli.cli.logdet import logdet
from gradcli.cli.inspection import forward, jacobian, jvp, vjp
from gradcli.errors import GradcliError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MODEL = 0, 1, 2, 3


class GradcliGroup(click.Group):
    """Prints every error as one line on stderr, never a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(
                args=args, prog_name=prog_name or "gradcli", complete_var=complete_var,
                standalone_mode=False, **extra,
            )
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
            code = EXIT_USAGE
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"Error: {exc.format_message()}{hint}", err=True)
            code = EXIT_USAGE
        except click.ClickException as exc:
            click.echo(f"Error: {exc.format_message()}", err=True)
            code = exc.exit_code
        except GradcliError as exc:
            click.echo(f"Error: {exc}", err=True)
            code = exc.exit_code
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            code = 130
        if not standalone_mode:
            return code
        sys.exit(code or 0)


@click.group(cls=GradcliGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradcli")
def cli():
    """Check and inspect gradients of TensorFlow models.

    A MODEL is a Python file that defines `model` and `inputs` (see the README);
    gradcli imports it, which runs its code.
    """


cli.add_command(check)
cli.add_command(hessian)
cli.add_command(logdet)
cli.add_command(forward)
cli.add_command(vjp)
cli.add_command(jvp)
cli.add_command(jacobian)


def main(args=None, prog_name="gradcli"):
    cli.main(args=args, prog_name=prog_name)
