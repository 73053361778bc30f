"""Results of ``gradcli forward``, ``vjp``, ``jvp`` and ``jacobian``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.results.outcome import Outcome, counted

@dataclass
class Summary:
    """Statistics of an array, for display when it is too large to print whole."""

    size: int
    min: float
    max: float
    mean: float
    norm: float  # Euclidean (Frobenius) norm of all entries
    first: list[float]  # the first FIRST entries in row-major order


@dataclass
class NamedArray:
    """One named array: an output, a seed, a gradient or a JVP."""

    name: str
    shape: list[int]
    dtype: str
    values: np.ndarray | None  # None: TensorFlow returned no gradient (disconnected)
    summary: Summary | None
    source: str = ""  # for seeds and tangents: where the values came from
    error: float | None = None  # numeric mode: largest finite-difference error estimate


@dataclass
class WeightNorm:
    """Per-weight gradient norm of a Keras model (``vjp``); see VANISHING/EXPLODING."""

    name: str
    shape: list[int]
    weight_norm: float
    gradient_norm: float | None  # None: disconnected
    ratio: float | None  # gradient_norm / weight_norm; None when the weight is zero
    status: str  # "ok", "vanishing", "exploding", "zero weight", "disconnected"


@dataclass
class JacobianEntry:
    output_index: list[int]
    input_index: list[int]
    value: float


@dataclass
class JacobianBlock:
    """d output / d input, of shape ``output_shape + input_shape``."""

    output: str
    input: str
    output_shape: list[int]
    input_shape: list[int]
    values: np.ndarray | None  # None: TensorFlow returned no gradient (disconnected)
    frobenius_norm: float = 0.0
    max_abs: float = 0.0
    nonzero: int = 0
    largest: list[JacobianEntry] = field(default_factory=list)  # by |value|, largest first
    error: float | None = None  # numeric mode: largest finite-difference error estimate

    @property
    def rows(self) -> int:
        return int(np.prod(self.output_shape, dtype=np.int64))

    @property
    def columns(self) -> int:
        return int(np.prod(self.input_shape, dtype=np.int64))


@dataclass
class ForwardResult(Outcome):
    model: str
    dtype: str
    outputs: list[NamedArray]
    notes: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        return f"{self.model}, {counted(len(self.outputs), 'output')}"

    def arrays(self) -> dict[str, np.ndarray]:
        return {a.name: a.values for a in self.outputs}


@dataclass
class VjpResult(Outcome):
    """J^T c for each differentiated input, summed over outputs."""

    model: str
    dtype: str
    method: str
    seeds: list[NamedArray]  # one per floating output, zeros where none was given
    gradients: list[NamedArray]
    weights: list[WeightNorm] = field(default_factory=list)  # Keras models only
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    evaluations: int = 0  # numeric mode: function evaluations
    weight_rule: str = ""  # the rule behind the weights' status, in words

    @property
    def headline(self) -> str:
        return f"{self.model}, {counted(len(self.gradients), 'gradient')}"

    def arrays(self) -> dict[str, np.ndarray]:
        return {g.name: g.values for g in self.gradients if g.values is not None}


@dataclass
class JvpResult(Outcome):
    """J t for every output, summed over the inputs given a tangent."""

    model: str
    dtype: str
    method: str
    tangents: list[NamedArray]
    outputs: list[NamedArray]
    notes: list[str] = field(default_factory=list)
    evaluations: int = 0

    @property
    def headline(self) -> str:
        return f"{self.model}, {counted(len(self.outputs), 'output')}"

    def arrays(self) -> dict[str, np.ndarray]:
        return {o.name: o.values for o in self.outputs}


@dataclass
class JacobianResult(Outcome):
    model: str
    dtype: str
    method: str
    mode: str  # "reverse", "forward" or "numeric"
    passes: int  # vectorised VJP/JVP passes, or function evaluations in numeric mode
    explanation: str  # why this mode, in words
    blocks: list[JacobianBlock]
    notes: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        return f"{self.model}, {counted(len(self.blocks), 'block')} ({self.mode})"

    def arrays(self) -> dict[str, np.ndarray]:
        """Keyed ``OUTPUT/INPUT`` (e.g. ``output/x``, ``output/dense/kernel``)."""
        return {f"{b.output}/{b.input}": b.values for b in self.blocks if b.values is not None}
