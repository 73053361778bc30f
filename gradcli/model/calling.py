"""Call the user's model the way the user calls it: positionally, in signature order.

Rule (``Calling.of``): every input that names a positional parameter
(positional-only or positional-or-keyword) is passed positionally, in the order
of the signature, up to the first such parameter that no input gives (a
default fills it, so what follows must be named); keyword-only parameters and
the rest go by keyword; inputs beyond the named parameters of a function with
``*args`` (and no ``**kwargs``) follow positionally, in the order ``inputs``
gives them.

Why it matters: ``tf.custom_gradient`` treats only *positional* tensors as the
inputs its gradient function answers for. Called with keywords, a decorated
function is differentiated through its forward ops and its own gradient is
never run, so a wrong custom gradient would pass. Plain functions, decorated
functions, methods, callable objects, ``functools.partial`` and ``tf.function``
(with or without ``input_signature``) all expose their parameters to
``inspect.signature``; a callable without a readable signature (a builtin) is
called with keywords, as its names are all gradcli knows.

``verdicts.same_function`` then proves the choice: it compares one
reverse-mode product of the function gradcli differentiates with the same
product taken through a plain call of the user's object.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Calling:
    """Which inputs go positionally (in order) and which by keyword."""

    positional: tuple[str, ...]
    keywords: tuple[str, ...]

    @classmethod
    def of(cls, target: Callable, names) -> "Calling":
        """How to call ``target`` with the inputs ``names`` (see the module docstring)."""
        names = list(names)
        try:
            parameters = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):  # no signature to read: names are all we have
            return cls((), tuple(names))
        given = set(names)
        positional, gap = [], False
        for p in parameters:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                continue
            if p.name in given and not gap:
                positional.append(p.name)
            else:
                gap = True
        named = {p.name for p in parameters if p.kind is not p.VAR_POSITIONAL}
        extra = [n for n in names if n not in named]
        takes_args = any(p.kind is p.VAR_POSITIONAL for p in parameters)
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in parameters)
        if extra and takes_args and not takes_kwargs and not gap:
            positional += extra
        keywords = [n for n in names if n not in positional]
        return cls(tuple(positional), tuple(keywords))

    def __call__(self, target: Callable, values: dict):
        return target(*(values[n] for n in self.positional), **{n: values[n] for n in self.keywords})

    def describe(self) -> str:
        """For notes: ``x, y positionally`` / ``scale by keyword``."""
        parts = []
        if self.positional:
            parts.append(f"{', '.join(self.positional)} positionally")
        if self.keywords:
            parts.append(f"{', '.join(self.keywords)} by keyword")
        return " and ".join(parts) or "no arguments"


@dataclass
class OwnCall:
    """The user's object called as the user's training code calls it, with no
    gradcli wrapper in between: the reference ``verdicts.same_function`` proves
    the checked function against.

    ``call`` maps the data inputs (tensors, by name) to the named outputs;
    ``variables`` maps weight names to the variables the user's code reads
    (a tape watches them as training does); ``description`` says how it is
    called, for reports (``model(x, y)``).
    """

    call: Callable[[dict], dict]
    variables: dict
    description: str


def describe_call(name: str, calling: Calling) -> str:
    """``model(x, y, *, scale=...)``: the call as the user would write it."""
    args = list(calling.positional) + [f"{n}={n}" for n in calling.keywords]
    return f"{name}({', '.join(args)})"
