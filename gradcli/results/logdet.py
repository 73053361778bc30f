"""Result of ``gradcli logdet``."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.results.check import Culprit, GraphSite, Tolerance
from gradcli.results.outcome import Outcome, counted

#: What central differences of the flow say of an example's autodiff Jacobian
#: (``verdicts.flow_jacobian``): it agrees with them, it is wrong, or they are
#: too noisy to tell (it is then used, as it was before it could be checked).
JACOBIAN_AGREES = "agrees"
JACOBIAN_WRONG = "wrong"
JACOBIAN_UNRESOLVED = "unresolved"
#: The log-det's verdict at an example: it agrees with slogdet of a Jacobian
#: finite differences vouch for, it disagrees, or no such Jacobian was found.
LOGDET_PASS = "pass"
LOGDET_MISMATCH = "mismatch"
LOGDET_NOT_JUDGED = "not judged"


@dataclass
class LogdetExample:
    """One example: the declared log-det, the Jacobian it is judged against
    (``against``: the autodiff one, or the central-difference one where the
    autodiff one is wrong) and what central differences of the flow say of
    the autodiff Jacobian (``verdicts.flow_jacobian``)."""

    index: int
    declared: float  # the model's log_det_jacobian
    logabsdet: float  # log|det J| of the Jacobian judged against (``against``); NaN when not judged
    sign: float  # sign of det J (0: singular)
    abs_error: float
    ok: bool | None  # the log-det is right (True), wrong (False), or could not be judged (None)
    verdict: str = LOGDET_PASS  # "pass", "mismatch" or "not judged"
    jacobian: str = JACOBIAN_AGREES  # the autodiff Jacobian by central differences: "agrees", "wrong", "unresolved"
    jacobian_rel_error: float = 0.0  # largest |J v - D| / max(|J v|, |D|) over the random directions
    against: str = "autodiff"  # the Jacobian judged against: "autodiff", "finite differences", "" (none)
    autodiff_logabsdet: float = float("nan")  # slogdet of the autodiff Jacobian, right or wrong


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
    # The autodiff Jacobian on its own evidence (``verdicts.flow_jacobian``), and the culprits.
    jacobian_directions: int = 0  # random directions central differences checked the Jacobian along
    n_jacobian_wrong: int = 0  # examples whose autodiff Jacobian central differences refute
    n_not_judged: int = 0  # examples whose log-det no trustworthy Jacobian could judge
    jacobian_findings: list[str] = field(default_factory=list)  # what was found of the Jacobian ("FAIL ..." fails)
    log_det_findings: list[str] = field(default_factory=list)  # what was found of the log-det ("FAIL ..." fails)
    culprit: Culprit | None = None  # the gradient that makes the Jacobian wrong, as ``check`` names it
    log_det_site: GraphSite | None = None  # the op and line computing a wrong declared log-det
    log_det_definition: str = ""  # file:line of the ``def`` of the function around ``log_det_site``

    def _parts(self) -> list["LogdetResult"]:
        return [self] + ([self.inverse] if self.inverse is not None else [])

    @property
    def found_problem(self) -> bool:
        return (any(p.n_failing or p.n_jacobian_wrong for p in self._parts())
                or any(not c.ok for c in self.consistency))

    @property
    def headline(self) -> str:
        failing = sum(p.n_failing for p in self._parts())
        wrong = sum(p.n_jacobian_wrong for p in self._parts())
        broken = sum(not c.ok for c in self.consistency)
        return (f"{self.name}, {counted(self.batch, 'example')}, {failing} failing"
                + (f", autodiff Jacobian wrong at {wrong}" if wrong else "")
                + (f", {broken} identities broken" if broken else ""))
