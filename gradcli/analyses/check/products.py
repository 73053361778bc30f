"""Where a check's products come from: J^T c (VJPs) and J t (JVPs) of the
checked function at the point.

``ModelProducts`` takes them by the model's own autodiff
(``numerics.autodiff``). A caller that already holds them (the layer pass
takes a unit's VJPs and JVPs in one traced call, ``analyses.layers.quick``)
hands a check its own provider with the same two methods, so the check's
rules run unchanged on products it did not take.
"""

from __future__ import annotations

from gradcli.numerics import autodiff
from gradcli.verdicts import same_function


class ModelProducts:
    """The products of ``model.function`` at ``model.point``."""

    def __init__(self, model):
        self.model = model

    def vjps(self, seeds: list[dict]) -> list[dict]:
        """J^T c at the point for each cotangent c of ``seeds``: one forward
        pass for them all (``autodiff.vjps``), and the product the proof took
        at the point with the same cotangents (``same_function.prove``: the
        probes' first draw is its draw) not taken again."""
        taken = same_function.taken_product(self.model)
        reused = [taken[1] if taken is not None and same_function.same_cotangents(taken[0], c) else None for c in seeds]
        missing = [c for c, r in zip(seeds, reused) if r is None]
        computed = iter(autodiff.vjps(self.model.function, self.model.point, self.model.wrt, missing)
                        if missing else [])
        return [r if r is not None else next(computed) for r in reused]

    def batched_jvp(self, tangents: dict, outputs) -> dict:
        """J t for a batch of tangents (``autodiff.batched_jvp``)."""
        return autodiff.batched_jvp(self.model.function, self.model.point, tangents, outputs)
