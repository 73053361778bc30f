"""Exceptions the library raises; the command line maps each to an exit code.

The library never prints or exits: it raises one of these with a one-line
message, and ``gradcli.cli`` prints ``Error: <message>`` and exits with
``exit_code``.
"""


class GradcliError(Exception):
    """Base class. ``exit_code`` is what the command line exits with."""

    exit_code = 3


class UsageError(GradcliError):
    """The user's options or values are wrong (exit 2): a bad VALUE, a seed of
    the wrong shape, an unknown input or output name."""

    exit_code = 2


class ModelError(GradcliError):
    """The model could not be loaded, run or checked (exit 3)."""

    exit_code = 3
