"""The one rule that turns any result into ``ok`` and an exit code.

Every result class derives from ``Outcome`` and says two things about itself:
``found_problem`` (a check disagreed: exit 1) and ``error_codes`` (the exit
codes of parts that could not be loaded, run or checked: the largest wins,
so a batch with one broken model exits 3 even when another fails).
"""

from __future__ import annotations

from gradcli.errors import EXIT_FAILED, EXIT_OK


class Outcome:
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
