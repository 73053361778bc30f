"""Correct (y = x * x), but leaves an alarm pending: each call of the model
(eager, or while it is traced) sets SIGALRM, whose default action ends the
process, to arrive 3 s later, so the last call leaves it due after the check."""
import signal

inputs = {"x": [1.0, 2.0]}


def model(x):
    signal.alarm(3)
    return x * x
