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
class Consistency:
    """An identity a bijector's parts must satisfy per example
    (``analyses.logdet.check_bijector``): how many examples break it, and the
    worst one's error and allowed error."""

    identity: str  # e.g. "inverse(forward(x)) = x"
    n_failing: int
    worst_example: int
    worst_error: float
    allowed: float

    @property
    def ok(self) -> bool:
        return self.n_failing == 0


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
    declared_name: str = "log_det_jacobian"  # what declared the log-det: the file's, or a bijector's method
    #: A bijector's (``Model.bijector``): its inverse's log-det against its own
    #: Jacobian, and the identities between the two directions
    inverse: "LogdetResult | None" = None
    consistency: list[Consistency] = field(default_factory=list)

    @property
    def found_problem(self) -> bool:
        return (self.n_failing > 0 or (self.inverse is not None and self.inverse.n_failing > 0)
                or any(not c.ok for c in self.consistency))

    @property
    def headline(self) -> str:
        failing = self.n_failing + (self.inverse.n_failing if self.inverse is not None else 0)
        broken = sum(not c.ok for c in self.consistency)
        return (f"{self.name}, {counted(self.batch, 'example')}, {failing} failing"
                + (f", {broken} identities broken" if broken else ""))
