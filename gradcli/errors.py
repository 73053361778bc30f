"""Exceptions the library raises, each carrying the exit code it ends a run with.

The library never prints or exits: it raises one of these with a one-line
message, and the command line (``gradcli.cli``) prints ``Error: <message>`` and
exits with ``exit_code``. A ``UsageError`` about one parameter names it by its
Python name (``rtol must be >= 0``), as the API's keyword arguments are
spelled; the command line shows the flag that set it instead (``--rtol``).
"""

from __future__ import annotations

import re

#: ``{@name}`` names a parameter; ``{@name=VALUE}`` names it set to a value
#: (``{@by_layer=false}``: ``--no-by-layer`` on the command line, ``by_layer=False``
#: in Python), so a message can say how to turn a flag off.
_PARAM = re.compile(r"\{@(\w+)(?:=(\w+))?\}")

#: Exit codes, documented once (docs/reference/exit-codes.md).
EXIT_OK = 0  # every check passed (or an inspect command ran)
EXIT_FAILED = 1  # a check found a problem
EXIT_USAGE = 2  # bad usage: options, values, configuration, output paths
EXIT_MODEL = 3  # the model could not be loaded, run or checked
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


#: Set to 1 (or ``gradcli --debug``) to see the traceback of an internal error.
DEBUG_VARIABLE = "GRADCLI_DEBUG"


def debugging() -> bool:
    import os

    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


#: First lines of TensorFlow's errors that only announce the cause below them.
_HEADERS = ("graph execution error:", "in user code:", "detected at node")


def error_line(exc: BaseException) -> str:
    """The one line of an exception's message that says what went wrong: its
    first line, unless that line only announces a cause given further down
    (TensorFlow's "Graph execution error:" and a tf.function's "in user
    code:", which end with the cause after the frames): then the last line
    that is neither a frame nor TensorFlow's node and op annotations, with
    the node TensorFlow names ("... (at node conv2d_1/BiasAdd)")."""
    whole = str(exc).strip()
    lines = [line.strip() for line in whole.splitlines() if line.strip()]
    if not lines:
        return ""
    if not lines[0].lower().startswith(_HEADERS):
        return lines[0]
    node = re.search(r"Detected at node '?([\w/.:-]+?)'? defined", whole)
    where = f" (at node {node.group(1)})" if node else ""
    for line in reversed(lines[1:]):
        if line.startswith(("File ", "[[", "{{")) or line.lower().startswith(_HEADERS):
            continue
        cause = re.sub(r"\s*\[\[\{\{node [^}]*\}\}\]\].*$|\s*\[Op:[^\]]*\].*$", "", line).strip() or line
        return cause + where
    return lines[0]


def internal_error_message(exc: BaseException) -> str:
    """One line for an exception gradcli did not expect: a bug in gradcli (or
    in TensorFlow), never the user's fault, and never silent."""
    text = error_line(exc)
    return (
        f"internal error: {type(exc).__name__}" + (f": {text}" if text else "")
        + f" (run with --debug or {DEBUG_VARIABLE}=1 for the traceback)"
    )


def death_message(exit_code: int | None) -> str:
    """How a process running a model ended, told as what the model did to it:
    the error row of a model that ends its process (``sys.exit`` while checked
    in this process, ``os._exit`` or a signal in a worker)."""
    return f"the model ended the process ({how_ended(exit_code)})"


def how_ended(exit_code: int | None) -> str:
    """``exit code N`` or ``signal SIGxxx``, from a process's exit code."""
    import signal

    if exit_code is not None and exit_code < 0:
        try:
            return f"signal {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"signal {-exit_code}"
    return f"exit code {exit_code}"


class GradcliError(Exception):
    """Base class. ``exit_code`` is what the command line exits with.

    A message names the parameters it is about as ``{@name}`` (the option's
    name, as the API's keyword spells it): the computing packages never spell
    a flag. Whoever shows the message spells them: the API as the keyword
    (``message(lambda name: name)``, which ``str`` gives), the command line as
    the flag (``--name``). ``template`` keeps them unspelled, for a message
    that travels on inside a result (a model's error row from a worker) and is
    spelled where it is shown (``spell_texts``).
    """

    exit_code = EXIT_MODEL

    def __init__(self, problem: str = "", *, param: str | None = None):
        self.problem = problem
        self.param = param
        super().__init__(self.message(lambda name: name))

    def __reduce__(self):  # the template (and the class) survive a worker's pipe
        return _rebuilt, (type(self), self.problem, self.param, self.__dict__)

    def message(self, spell) -> str:
        """The message with each parameter name spelled by ``spell(name)``."""
        problem = spell_text(self.problem, spell)
        return problem if self.param is None else f"{spell(self.param)} {problem}"

    @property
    def template(self) -> str:
        """The message with its parameters left as ``{@name}``."""
        return self.message(lambda name: "{@" + name + "}")

    @property
    def names_parameters(self) -> bool:
        """Whether the message names a parameter (``param`` or ``{@name}``),
        which each caller spells its own way (keyword or flag)."""
        return self.param is not None or bool(_PARAM.search(self.problem))


def spell_text(text: str, spell) -> str:
    """``text`` with each ``{@name}`` replaced by ``spell(name)``, and each
    ``{@name=VALUE}`` by that spelling set to VALUE (``set_to``)."""
    return _PARAM.sub(lambda m: set_to(spell(m.group(1)), m.group(2)), text)


def set_to(spelled: str, value: str | None) -> str:
    """A parameter's spelling set to ``value``: a flag (``--by-layer``, declared
    ``--by-layer/--no-by-layer`` as every boolean flag here is) as ``--by-layer``
    or ``--no-by-layer``, another flag as ``--mode fast``, a keyword or key as
    ``by_layer=False``."""
    if value is None:
        return spelled
    if spelled.startswith("{@"):  # spelled as a template (``template``): kept for later
        return f"{spelled[:-1]}={value}}}"
    boolean = {"true": True, "false": False}.get(value.lower())
    if spelled.startswith("--"):
        if boolean is None:
            return f"{spelled} {value}"
        return spelled if boolean else f"--no-{spelled[2:]}"
    return f"{spelled}={value if boolean is None else boolean}"


def spell_texts(value, spell, _seen=None):
    """Spell the ``{@name}`` parameters of every message a result holds (its
    error rows, notes, warnings, explanations: any string field, in lists and
    nested results too), in place; returns ``value`` (a string: spelled)."""
    import dataclasses

    if isinstance(value, str):
        return spell_text(value, spell) if "{@" in value else value
    _seen = set() if _seen is None else _seen
    if id(value) in _seen:
        return value
    _seen.add(id(value))
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = spell_texts(item, spell, _seen)
    elif isinstance(value, dict):
        for key, item in value.items():
            value[key] = spell_texts(item, spell, _seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if isinstance(item, (str, list, dict)) or dataclasses.is_dataclass(item):
                setattr(value, field.name, spell_texts(item, spell, _seen))
    return value


def _rebuilt(kind, problem, param, state):
    error = kind.__new__(kind)
    GradcliError.__init__(error, problem, param=param)
    error.__dict__.update(state)
    return error


class UsageError(GradcliError):
    """The user's options or values are wrong (exit 2): a bad VALUE, a seed of
    the wrong shape, an unknown input or output name.

    With ``param``, the message is about that parameter: ``problem`` follows
    its name (``UsageError("must be >= 0, got -1", param="rtol")`` reads
    "rtol must be >= 0, got -1"), and the command line puts the flag there.
    Other parameters named in ``problem`` are written ``{@name}`` for the same
    reason (``"needs {@radius}"``). ``bad_value``: the parameter's value is
    wrong (``Invalid value for '--rtol': ...``) rather than its combination
    with others (``--samples needs --radius``).

    Without ``param``, a message may still name parameters as ``{@name}``
    wherever they fall (``"{@wrt}: unknown input 'y'"``): the API reads
    ``wrt: unknown input 'y'``, the command line ``--wrt: unknown input 'y'``.
    """

    exit_code = EXIT_USAGE

    def __init__(self, problem: str, *, param: str | None = None, bad_value: bool = True):
        self.bad_value = bad_value
        super().__init__(problem, param=param)


class UnknownKeyword(UsageError, TypeError):
    """A keyword argument an API function does not take: a ``UsageError``
    (exit 2 on the command line's terms) and a ``TypeError``, as Python's own
    is, naming the nearest known keyword and every keyword the function takes."""


class ModelError(GradcliError):
    """The model could not be loaded, run or checked (exit 3)."""

    exit_code = EXIT_MODEL
