"""Results of ``gradcli check``, and the verdict words every comparison uses."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "PASS", "MISMATCH", "ZERO", "DISCONNECTED", "INCONCLUSIVE", "KINK", "SURROGATE", "EXPLANATIONS",
    "Kink", "GraphSite", "Culprit", "Taylor", "Element", "Tolerance", "PairResult", "ModelResult",
    "CheckResult",
]

#: Verdict words. A verdict in FAILING makes the check exit 1.
PASS = "pass"
MISMATCH = "mismatch"
ZERO = "zero"
DISCONNECTED = "disconnected"
INCONCLUSIVE = "inconclusive"
KINK = "kink"
SURROGATE = "surrogate"

EXPLANATIONS = {
    PASS: "analytic and numeric derivatives agree within tolerance",
    MISMATCH: "the analytic derivative disagrees with finite differences beyond tolerance",
    ZERO: "the derivative is identically zero: nothing can be learned through this path",
    DISCONNECTED: "TensorFlow returns no gradient (None) for this input",
    INCONCLUSIVE: "finite differences are too noisy here to confirm the gradient",
    KINK: "the point sits on a non-differentiability: the one-sided slopes disagree",
    SURROGATE: (
        "the function is piecewise constant here while the analytic gradient is not: "
        "a straight-through or other surrogate gradient"
    ),
}


@dataclass
class Kink:
    """An element on a non-differentiability: one-sided slopes and the analytic value."""

    output_index: list[int]
    input_index: list[int]
    left: float  # slope from the left, lim (f(x) - f(x - h)) / h
    right: float  # slope from the right, lim (f(x + h) - f(x)) / h
    analytic: float
    subgradient: bool  # analytic lies between left and right: valid, not a failure


@dataclass
class GraphSite:
    """An operation of the traced model graph, located in the model file."""

    op_type: str
    op_name: str
    location: str  # "file:line" of the model code that created it ("" if unknown)
    description: str = ""  # e.g. "tf.round: gradient None"


@dataclass
class Culprit:
    """The first operation whose own gradient disagrees with finite differences."""

    site: GraphSite
    definition: str  # custom gradients: "file:line" of the decorated function, else ""
    analytic: float  # the probe <u, J^T v> by the op's gradient
    numeric: float  # the same probe by finite differences of the op alone
    rel_error: float
    checked_ops: int  # ops checked up to and including this one


@dataclass
class Taylor:
    """Taylor remainder test along a random direction: r(h) = |s(x+hu) - s(x) - h <g, u>|."""

    steps: list[float]
    remainders: list[float]
    orders: list[float]  # log2(r(h) / r(h/2)) for consecutive steps above round-off
    order: float | None  # the observed order at the smallest usable steps
    verdict: str  # "second order" (gradient consistent), "first order" (wrong), "exact", "unclear"


@dataclass
class Element:
    """One Jacobian element (or one probe): where it is and both values."""

    output_index: list[int]
    input_index: list[int]
    analytic: float
    numeric: float
    abs_error: float
    rel_error: float
    fd_error: float  # the finite-difference error estimate for this element


@dataclass
class Tolerance:
    rtol: float
    atol: float
    rule: str  # which rule chose these numbers, for the report


@dataclass
class PairResult:
    """The check of one (input, output) pair."""

    input: str
    output: str
    verdict: str
    failed: bool
    mode: str  # "full" (every element) or "fast" (random projections)
    max_abs_error: float
    max_rel_error: float
    fd_error: float  # largest finite-difference error estimate in the pair
    compared: int  # Jacobian elements (full) or probes (fast) compared
    worst: Element | None = None
    failing: list[Element] = field(default_factory=list)  # worst first, capped
    n_failing: int = 0
    explanation: str = ""
    warnings: list[str] = field(default_factory=list)
    reverse_failed: bool = True  # fast mode: False when only forward mode disagreed
    kinks: list[Kink] = field(default_factory=list)  # capped like ``failing``
    n_kinks: int = 0
    n_surrogate: int = 0  # elements where the function is locally constant
    sites: list[GraphSite] = field(default_factory=list)  # where the path is cut / surrogate ops
    culprit: Culprit | None = None
    taylor: Taylor | None = None


@dataclass
class ModelResult:
    """Every checked pair of one model, or the error that stopped it."""

    name: str
    path: str
    dtype: str = ""
    mode: str = ""
    tolerance: Tolerance | None = None
    pairs: list[PairResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    evaluations: int = 0  # function evaluations spent on finite differences
    predicted_full_seconds: float | None = None  # auto mode: the prediction that chose it
    error: str | None = None  # set when the model could not be loaded, run or checked
    error_code: int = 0

    @property
    def failed(self) -> bool:
        return any(p.failed for p in self.pairs)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed


@dataclass
class CheckResult:
    models: list[ModelResult]
    skipped: list[str] = field(default_factory=list)  # not run: --fail-fast stopped the run

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.models)

    @property
    def exit_code(self) -> int:
        """3 if any model could not be checked, else 1 if any check failed, else 0."""
        errors = [m.error_code or 3 for m in self.models if m.error is not None]
        if errors:
            return max(errors)
        return 1 if any(m.failed for m in self.models) else 0
