"""Results of ``gradcli check``, and the verdict words (from ``results.words``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradcli.errors import EXIT_MODEL
from gradcli.results.outcome import Outcome, counted
from gradcli.results.words import (  # noqa: F401  (the words, re-exported with the results)
    DISCONNECTED, EXPLANATIONS, FAIL_ON_WORDS, INCONCLUSIVE, KINK, MISMATCH, PASS, SURROGATE, ZERO,
)

__all__ = [
    "PASS", "MISMATCH", "ZERO", "DISCONNECTED", "INCONCLUSIVE", "KINK", "SURROGATE", "EXPLANATIONS",
    "FAIL_ON_WORDS",
    "Kink", "GraphSite", "BlockWindow", "Culprit", "Taylor", "Element", "Tolerance", "Power",
    "PairResult", "ModelResult", "CheckResult", "SweepPoint", "Sweep", "CallProof", "ValueShift",
]

@dataclass
class Kink:
    """An element on a non-differentiability: one-sided slopes and the analytic value."""

    output_index: list[int]
    input_index: list[int]
    left: float  # slope from the left, lim (f(x) - f(x - h)) / h
    right: float  # slope from the right, lim (f(x + h) - f(x)) / h
    analytic: float
    subgradient: bool  # analytic lies between left and right: valid, not a failure
    tie: bool = False  # refused by the tie rule (``diagnose.tie_direction``), though between its slopes
    jump: bool = False  # the function jumps here (``ladder.one_sided_ladder``): no derivative; left/right are quotients


@dataclass
class BlockWindow:
    """Part of a failing pair's Jacobian block, for ``check --plot``: rows are
    output elements, columns input elements (both flattened, row-major), from
    ``row_offset`` / ``col_offset`` of a block of ``rows`` x ``columns``."""

    row_offset: int
    col_offset: int
    rows: int
    columns: int
    analytic: Any  # np.ndarray [window rows, window columns]
    numeric: Any
    failing: Any  # bool, the elements outside tolerance
    output_shape: tuple = ()  # the shapes the flattened rows and columns come from
    input_shape: tuple = ()


@dataclass
class GraphSite:
    """An operation of the traced model graph, located in the model file."""

    op_type: str
    op_name: str
    location: str  # "file:line" of the model code that created it ("" if unknown)
    description: str = ""  # e.g. "tf.round: gradient None"


@dataclass
class ValueShift:
    """The model returns other values when differentiated
    (``verdicts.differentiated_values``): at output element ``index`` the call
    ``way`` (e.g. "under a GradientTape") gives ``differentiated`` where the
    call finite differences evaluate gives ``plain``."""

    way: str
    output: str
    index: list[int]
    plain: float
    differentiated: float
    difference: float  # the largest |differentiated - plain| over the output (at ``index``)
    allowed: float  # round-off the rule allows: sqrt(eps) (max |differentiated| + max |plain|)


@dataclass
class Culprit:
    """The first operation whose own gradient disagrees with finite differences."""

    site: GraphSite
    definition: str  # custom gradients: "file:line" of the decorated function, else ""
    analytic: float  # the probe <u, J^T v> by the op's gradient
    numeric: float  # the same probe by finite differences of the op alone
    rel_error: float  # |analytic - numeric| / max(|analytic|, |numeric|), as an element's
    checked_ops: int  # ops checked up to and including this one
    checked: str = "own gradient"  # or "gradient to the output" (see verdicts.culprit)


@dataclass
class Taylor:
    """Taylor remainder test along a random direction: r(h) = |s(x+hu) - s(x) - h <g, u>|."""

    steps: list[float]
    remainders: list[float]
    orders: list[float]  # log2(r(h) / r(h/2)) for consecutive steps above round-off
    order: float | None  # the observed order at the smallest usable steps
    verdict: str  # "second order" (consistent), "first order" (wrong), "exact", "unclear", "not finite"


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
    #: the inconclusive rule's fraction: a pass counts when the error estimate
    #: (times FD_SAFETY) stays within it of the derivatives
    #: (``verdicts.compare.RESOLVE_FRACTIONS``)
    resolve: float = 0.1
    #: the dtype whose defaults these are ("" by hand; not in the JSON): sets an inconclusive pair's advice
    dtype: str = field(default="", metadata={"internal": True})


@dataclass
class Power:
    """What a fast check could have seen (``verdicts.compare.detectable_error``):
    a single Jacobian element off by ``absolute`` or more (``relative`` to an
    element of ``element_size``, the RMS element) fails with ``probability``."""

    absolute: float
    relative: float
    element_size: float
    probability: float
    probes: int


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
    reverse_failed: bool = True  # False when only forward mode disagreed
    forward_probe: tuple | None = None  # forward mode's failing probe: (forward, numeric)
    kinks: list[Kink] = field(default_factory=list)  # capped like ``failing``
    n_kinks: int = 0
    n_surrogate: int = 0  # elements where the function is locally constant
    sites: list[GraphSite] = field(default_factory=list)  # where the path is cut / surrogate ops
    culprit: Culprit | None = None
    value_shift: ValueShift | None = None  # the model returns other values when differentiated
    taylor: Taylor | None = None
    window: BlockWindow | None = None  # failing pairs, when asked for (CheckOptions.keep_blocks)
    power: Power | None = None  # fast mode: the smallest single-element error it would see
    resolution: float | None = None  # zero verdict: the numeric resolution that confirms 0
    # The tie rule (``diagnose.tie_direction``): output elements whose kinks it
    # refused, and the first of them (input_index empty: the derivative along
    # the direction that moves each group of tied values together).
    n_tie_refused: int = 0
    # Whether the kinks outside their own slopes share their non-smoothness with
    # other kink elements (``diagnose.shared_kinks``; None: none on a tie).
    kinks_shared: bool | None = None
    tie_broken_agrees: bool = False  # ties broken in index order leave the VJP as it is (by_layer._ordered_tie_break)
    tie_refused: list[Element] = field(default_factory=list)


@dataclass
class CallProof:
    """Whether the function checked is the user's own (``verdicts.same_function``):
    one reverse-mode product through gradcli's call against the same product
    through the user's own call ``call``."""

    proven: bool  # the two agree: the checked function is the user's
    differs: bool  # the two disagree: every verdict is about another function
    call: str  # the user's call compared with, e.g. "model(x, y)"
    input: str  # the input that differs most (or the worst, when proven)
    rel_difference: float  # |g - g_own| / (|g| + |g_own| + its share of the whole) for that input
    rtol: float  # the bound it was held to (sqrt(eps) of ``dtype``)
    dtype: str  # the coarsest dtype either side computed in
    detail: str = ""  # why it is not proven
    # The same product through gradcli's call, taken twice with the same
    # cotangent, differs: the gradient is nondeterministic (``site``: the op
    # whose own gradient differs run to run), not another function.
    nondeterministic: bool = False
    site: GraphSite | None = None


@dataclass
class SweepPoint:
    """One point of a sweep (``gradcli.analyses.sweep``) and its check."""

    label: str  # "random point 3", "x = 0", "tie x[1] = x[0]", ...
    verdict: str  # "pass", the failing verdicts joined, or "error"
    failed: bool
    score: float  # the largest relative error of a failing pair (inf for an error)
    values: dict  # input -> value (native dtype, as nested lists) that reproduce it
    error: str | None = None


@dataclass
class Sweep:
    """Checks around the given point: random samples and special points."""

    samples: int
    radius: float
    seed: int
    special: bool
    points: int = 0  # points checked (outside the domain not counted)
    n_failing: int = 0
    outside: int = 0  # points where the model is not finite or raises: not checked
    outside_examples: list[str] = field(default_factory=list)
    dropped: int = 0  # special points beyond the limit, not checked
    worst: SweepPoint | None = None
    witness: str = ""  # ``--set`` arguments that reproduce ``worst`` alone

    @property
    def failed(self) -> bool:
        return self.n_failing > 0


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
    #: A usage error's (problem, param, bad_value), so that the command line can
    #: spell its parameters as flags (``error`` spells them as in the API).
    sweep: Sweep | None = None  # ``--samples`` / ``--special``: checks at more points
    call_proof: CallProof | None = None  # is the checked function the user's own?
    #: The layer-by-layer pass (``analyses.layers``): one ``LayerResult`` per
    #: checked layer call, failures first; empty when the pass did not run.
    layers: list = field(default_factory=list)

    @property
    def not_the_users_function(self) -> bool:
        """The proof found that gradcli's call differs from the user's own: no
        verdict about the pairs may pass (``verdicts.same_function``)."""
        return self.call_proof is not None and self.call_proof.differs

    @property
    def failed(self) -> bool:
        return (
            any(p.failed for p in self.pairs)
            or (self.sweep is not None and self.sweep.failed)
            or self.not_the_users_function
            or any(layer.failed for layer in self.layers)
        )

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed


@dataclass
class CheckResult(Outcome):
    models: list[ModelResult]
    skipped: list[str] = field(default_factory=list)  # not run: --fail-fast stopped the run

    @property
    def found_problem(self) -> bool:
        return any(m.failed for m in self.models)

    @property
    def error_codes(self) -> list[int]:
        return [m.error_code or EXIT_MODEL for m in self.models if m.error is not None]

    @property
    def error_messages(self) -> list[str]:
        """One line per model that could not be checked, for stderr."""
        return [m.error for m in self.models if m.error is not None]

    @property
    def headline(self) -> str:
        text = f"{counted(len(self.models), 'model')}, {sum(m.ok for m in self.models)} passed"
        return text + (f", {len(self.skipped)} not run" if self.skipped else "")
