"""Result of ``gradcli logdet``."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.results.check import Tolerance
from gradcli.results.outcome import Outcome, counted

@dataclass
class LogdetExample:
    index: int
    declared: float  # the model's log_det_jacobian
    logabsdet: float  # log|det J| from slogdet of the autodiff Jacobian
    sign: float  # sign of det J (0: singular)
    abs_error: float
    ok: bool


@dataclass
class LogdetResult(Outcome):
    name: str
    path: str
    input: str
    output: str
    dimension: int
    batch: int
    dtype: str
    tolerance: Tolerance
    examples: list[LogdetExample] = field(default_factory=list)  # in batch order; the worst when capped
    worst: LogdetExample | None = None
    n_failing: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def found_problem(self) -> bool:
        return self.n_failing > 0

    @property
    def headline(self) -> str:
        return f"{self.name}, {counted(self.batch, 'example')}, {self.n_failing} failing"
