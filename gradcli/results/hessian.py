"""Results of ``gradcli hessian``: spectra, trace, finite-difference check, sampling."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.results.check import PairResult, Tolerance
from gradcli.results.outcome import Outcome, counted

@dataclass
class Block:
    """One differentiated input inside theta: ``theta[offset:offset+size]``."""

    name: str
    shape: tuple
    offset: int
    size: int

    def label(self, flat_index: int) -> str:
        """``w[1, 2]`` for an element of this block; a scalar input is its bare name."""
        if not self.shape:
            return self.name
        index = np.unravel_index(int(flat_index), self.shape)
        return f"{self.name}[{', '.join(str(int(i)) for i in index)}]"



#: Definiteness verdicts (``gradcli.verdicts.curvature.classify``).
POSITIVE_DEFINITE = "positive definite"
POSITIVE_SEMIDEFINITE = "positive semidefinite"
NEGATIVE_DEFINITE = "negative definite"
NEGATIVE_SEMIDEFINITE = "negative semidefinite"
INDEFINITE = "indefinite"
ZERO = "zero"
CONVEX_VERDICTS = (POSITIVE_DEFINITE, POSITIVE_SEMIDEFINITE, ZERO)
CONCAVE_VERDICTS = (NEGATIVE_DEFINITE, NEGATIVE_SEMIDEFINITE, ZERO)



@dataclass
class Spectrum:
    """Eigenvalues at one point and the verdict they give."""

    method: str  # "dense" (all eigenvalues) or "lanczos" (the extremes)
    eigenvalues: np.ndarray  # ascending; lanczos: the `top` smallest then the `top` largest
    smallest: float
    largest: float
    zero_tol: float
    zero_rule: str
    verdict: str
    condition: float | None  # max|lambda| / min|lambda|; inf if singular; None if unknown
    residuals: np.ndarray | None = None  # lanczos: ||H y - theta y|| per eigenvalue
    hvps: int = 0  # Hessian-vector products spent
    iterations: int = 0  # lanczos restarts
    converged: bool = True


@dataclass
class Trace:
    estimate: float
    stderr: float  # 0 when exact
    probes: int  # 0 when exact (dense: the sum of the diagonal)
    method: str  # "exact" or "hutchinson"


@dataclass
class FDCheck:
    """Finite differences of the gradient against the analytic Hessian."""

    mode: str  # "full" or "fast"
    tolerance: Tolerance
    pairs: list[PairResult]
    evaluations: int
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(p.failed for p in self.pairs)


@dataclass
class SamplePoint:
    values: dict  # name -> array: the wrt inputs at this point
    smallest: float
    largest: float
    verdict: str


@dataclass
class Sampling:
    samples: int
    radius: float
    rng_seed: int
    rule: str  # how points were drawn
    n_negative: int  # points (the given one included) with an eigenvalue < -zero_tol
    n_positive: int  # ... with an eigenvalue > zero_tol
    n_nonfinite: int
    worst: SamplePoint | None  # the witness: lowest smallest (highest largest for concave)
    witness_for: str  # "convex" or "concave": which sign the witness is worst for
    smallest: np.ndarray  # per sample
    largest: np.ndarray


@dataclass
class Slice:
    """f(theta + t v) along the eigenvector v of the smallest eigenvalue."""

    eigenvalue: float
    direction: np.ndarray
    t: np.ndarray
    values: np.ndarray
    slope: float  # g . v at t = 0, for the quadratic model f0 + slope t + lambda t^2 / 2


@dataclass
class HessianResult(Outcome):
    name: str
    path: str
    dtype: str
    function: str  # how the scalar was formed from the outputs
    n: int
    blocks: list[Block]
    labels: list[str]
    value: float
    gradient_norm: float
    spectrum: Spectrum
    trace: Trace
    hessian: np.ndarray | None = None  # dense only, as computed (not symmetrised)
    symmetry_error: float | None = None  # max |H - H^T| (dense)
    eigenvectors: np.ndarray | None = None  # dense: columns, ascending eigenvalues
    lowest_vector: np.ndarray | None = None  # eigenvector of the smallest eigenvalue
    fd_check: FDCheck | None = None
    sampling: Sampling | None = None
    expect: str | None = None
    expectation_met: bool | None = None
    expectation_reason: str = ""
    slice: Slice | None = None
    point: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def found_problem(self) -> bool:
        """The expectation failed or the Hessian disagrees with finite differences."""
        return self.expectation_met is False or (self.fd_check is not None and self.fd_check.failed)

    @property
    def headline(self) -> str:
        parts = [self.name, counted(self.n, "parameter"), self.spectrum.verdict]
        if self.expect is not None:
            parts.append(f"{self.expect} {'met' if self.expectation_met else 'not met'}")
        if self.fd_check is not None and self.fd_check.failed:
            parts.append("finite differences disagree")
        return ", ".join(parts)

    def arrays(self) -> dict[str, np.ndarray]:
        """For ``--save``. Keys: ``eigenvalues``, ``residuals`` (Lanczos), ``hessian`` and
        ``eigenvectors`` (dense, columns), ``lowest_vector``, ``point/NAME`` and, after
        sampling, ``witness/NAME`` (pass back as ``--set NAME=@FILE.npz:witness/NAME``)."""
        arrays = {"eigenvalues": self.spectrum.eigenvalues, "lowest_vector": self.lowest_vector}
        if self.spectrum.residuals is not None:
            arrays["residuals"] = self.spectrum.residuals
        if self.hessian is not None:
            arrays["hessian"] = self.hessian
            arrays["eigenvectors"] = self.eigenvectors
        for name, value in self.point.items():
            arrays[f"point/{name}"] = value
        if self.sampling is not None and self.sampling.worst is not None:
            for name, value in self.sampling.worst.values.items():
                arrays[f"witness/{name}"] = value
        return {k: np.asarray(v) for k, v in arrays.items() if v is not None}
