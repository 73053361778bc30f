"""Results of the layer-by-layer pass (``gradcli.analyses.layers``): one row per
checked call of a layer, kept on ``ModelResult.layers``."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.results.check import CallProof, PairResult, Power

__all__ = ["LayerResult", "LAYER_ERROR"]

#: The verdict of a layer whose local check could not run (its ``error`` says why).
LAYER_ERROR = "error"


@dataclass
class LayerResult:
    """The local check of one layer at one of its call sites: the layer's output
    as a function of its floating inputs and its trainable weights, at the
    activations that reached it when the whole model ran once."""

    name: str  # the layer's name, e.g. "conv2_block1_1_conv"
    path: str  # where it sits in the model, e.g. "resnet50/conv2_block1_1_conv"
    class_name: str  # e.g. "Conv2D"
    call_site: str  # "file:line" of the ``def call`` of its class ("" if unknown)
    call_index: int  # 1 for the first call of the layer in the forward pass, 2 for the next...
    calls: int  # how many times the forward pass called this layer (shared layers: > 1)
    weights: int  # trainable weight elements checked
    elements: int  # input activation elements checked
    mode: str  # "full" (every element) or "fast" (random projections); "" when not run
    verdict: str  # "pass", the failing verdicts joined by ", ", or "error"
    failed: bool
    seconds: float = 0.0
    power: Power | None = None  # fast mode: its pairs' weakest, relative to the unit's RMS element (``by_layer.layer_power``)
    pairs: list[PairResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    call_proof: CallProof | None = None  # is the local function the layer's own call?
    error: str | None = None  # why its local check could not run
    #: the error is gradcli's own (an exception it did not expect, not a
    #: reason the layer cannot be checked alone): the model ends in error (exit 3)
    internal: bool = False

    @property
    def label(self) -> str:
        """``path`` and, for a layer called more than once, which call."""
        return self.path if self.calls == 1 else f"{self.path} (call {self.call_index} of {self.calls})"
