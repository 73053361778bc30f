"""How a worker process ended, told as what the model did to it: the words of
the error row a model gets when it ends its process (``sys.exit`` while
checked in this process, ``os._exit`` or a signal in a worker). No import of
the checks or of TensorFlow: the supervisor and the checks both read it.
"""

from __future__ import annotations

import signal


def death_message(exit_code: int | None) -> str:
    """How a worker ended, told as what the model did to it."""
    return f"the model ended the process ({how_ended(exit_code)})"


def how_ended(exit_code: int | None) -> str:
    """``exit code N`` or ``signal SIGxxx``, from a process's exit code."""
    if exit_code is not None and exit_code < 0:
        try:
            return f"signal {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"signal {-exit_code}"
    return f"exit code {exit_code}"
