"""The one rule that turns any result into ``ok`` and an exit code, and how
every result shows itself in Python.

Every result class derives from ``Outcome`` and says two things about itself:
``found_problem`` (a check disagreed: exit 1) and ``error_codes`` (the exit
codes of parts that could not be loaded, run or checked: the largest wins,
so a batch with one broken model exits 3 even when another fails).

In Python (``gradcli.check(...)`` in a notebook or a test), a result reads as
the command line shows it, by one mechanism for every result class:

* ``str(result)`` is the text report the command prints (plain text, no
  colour), made by ``gradcli.render.report``, which holds the one table of
  which renderer shows which result class. Results are plain data and import
  no renderer: ``render`` is looked up by name when ``str`` is called (the
  registry pattern: render knows results, results know only that a renderer
  exists), so importing results imports neither rich nor the renderers.
* ``bool(result)`` is ``result.ok``: ``if gradcli.check(...):`` reads as it
  should, and ``assert gradcli.check(...)`` fails on a failed check. A result
  without a verdict (``forward``, ``vjp``, ``jvp``, ``jacobian``) is ok.
* ``repr(result)`` is one line, ``<CheckResult: 1 model, 0 passed, exit 1>``:
  the class, its ``headline`` and the exit code, never the arrays inside (a
  dataclass's generated repr, which would print every field, is replaced
  for every subclass; a class that defines its own ``__repr__`` keeps it).
"""

from __future__ import annotations

from gradcli.errors import EXIT_FAILED, EXIT_OK


def counted(count: int, word: str) -> str:
    """``1 model``, ``2 models``: for headlines."""
    return f"{count} {word if count == 1 else word + 's'}"


#: The package whose ``report(result)`` gives the text report (``__str__``).
RENDERERS = "gradcli.render"


class Outcome:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Set before @dataclass runs, which leaves a __repr__ in the class body alone.
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = Outcome.__repr__

    @property
    def found_problem(self) -> bool:
        return False

    @property
    def error_codes(self) -> list[int]:
        return []

    @property
    def ok(self) -> bool:
        return not self.error_codes and not self.found_problem

    @property
    def exit_code(self) -> int:
        if self.error_codes:
            return max(self.error_codes)
        return EXIT_FAILED if self.found_problem else EXIT_OK

    @property
    def headline(self) -> str:
        """What ``repr`` says between the class name and the exit code; override."""
        return ""

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        parts = [p for p in (self.headline, f"exit {self.exit_code}") if p]
        return f"<{type(self).__name__}: {', '.join(parts)}>"

    def __str__(self) -> str:
        import importlib

        return importlib.import_module(RENDERERS).report(self)
