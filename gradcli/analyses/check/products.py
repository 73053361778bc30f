"""Where a check's products come from: J^T c (VJPs) and J t (JVPs) of the
checked function at the point.

``ModelProducts`` takes them by the model's own autodiff
(``numerics.autodiff``). A caller that already holds them (the layer pass
takes a unit's VJPs and JVPs in one traced call, ``analyses.layers.quick``)
hands a check its own provider with the same methods, so the check's rules
run unchanged on products it did not take. ``ProgramProducts`` serves them
from the traced program a warm check keeps (``warm``).
"""

from __future__ import annotations

from gradcli.analyses.check import warm
from gradcli.numerics import autodiff
from gradcli.verdicts import same_function


class ModelProducts:
    """The products of ``model.function`` at ``model.point``."""

    def __init__(self, model):
        self.model = model

    #: Whether ``batched_jvp`` takes eager JVPs, one forward pass of the model
    #: each (``FullCheck.eager_shown`` takes as few of them as it can).
    eager_jvps = True

    def vjps(self, seeds: list[dict]) -> list[dict]:
        """J^T c at the point for each cotangent c of ``seeds``: one forward
        pass for them all (``autodiff.vjps``), and the product the proof took
        at the point with the same cotangents (``same_function.prove``: the
        probes' first draw is its draw) not taken again."""
        taken = same_function.taken_product(self.model)
        reused = [taken[1] if taken is not None and same_function.same_cotangents(taken[0], c) else None for c in seeds]
        missing = [c for c, r in zip(seeds, reused) if r is None]
        computed = iter(self.taken_vjps(missing) if missing else [])
        return [r if r is not None else next(computed) for r in reused]

    def taken_vjps(self, seeds: list[dict]) -> list[dict]:
        """``autodiff.vjps`` at the point, for the seeds not taken already."""
        return autodiff.vjps(self.model.function, self.model.point, self.model.wrt, seeds)

    def batched_jvp(self, tangents: dict, outputs) -> dict:
        """J t for a batch of tangents (``autodiff.batched_jvp``)."""
        return autodiff.batched_jvp(self.model.function, self.model.point, tangents, outputs)

    def traced_jvp(self, tangents: dict, outputs, returned: dict | None = None) -> dict:
        """``batched_jvp`` with the JVPs taken inside one traced function, as a
        compiled JVP or HVP takes them (``autodiff.traced_jvp``; ``returned``
        as there)."""
        return autodiff.traced_jvp(self.model.function, self.model.point, tangents, outputs, returned)

    def jacobians(self, wrt, outputs) -> dict:
        """The reverse-mode Jacobian blocks (``autodiff.jacobians``)."""
        return autodiff.jacobians(self.model.function, self.model.point, wrt, outputs, mode="reverse").blocks


class ProgramProducts(ModelProducts):
    """The products of ``model.function`` at ``model.point`` from the program a
    warm check keeps (``warm.Entry``, ``autodiff.Program``): the same bodies,
    traced once. A program that raises is dropped (``warm.refused``) and the
    product is taken eagerly, where a failure of the function itself raises
    again as in a cold check."""

    def __init__(self, model, entry):
        super().__init__(model)
        self.entry, self.program = entry, entry.program

    def taken_vjps(self, seeds: list[dict]) -> list[dict]:
        return self._served(lambda: self.program.vjps(self.model.point, seeds), super().taken_vjps, seeds)

    @property
    def eager_jvps(self) -> bool:
        return self.program is None or self.entry.own_gradients

    def batched_jvp(self, tangents: dict, outputs) -> dict:
        """The program's JVPs are traced ones: they stand for the eager JVPs
        except where the function has a gradient of its own (a
        ``tf.custom_gradient``, ``autodiff``'s docstring), whose JVPs are
        then taken eagerly, as in a cold check (the traced ones are
        ``traced_jvp``'s)."""
        if self.entry.own_gradients:
            return super().batched_jvp(tangents, outputs)
        return self._served(lambda: self.program.batched_jvp(self.model.point, tangents, outputs),
                            super().batched_jvp, tangents, outputs)

    def traced_jvp(self, tangents: dict, outputs, returned: dict | None = None) -> dict:
        return self._served(lambda: self.program.batched_jvp(self.model.point, tangents, outputs),
                            super().traced_jvp, tangents, outputs, returned)

    def jacobians(self, wrt, outputs) -> dict:
        if self.program is None or not (set(wrt) <= set(self.program.wrt) and set(outputs) <= set(self.program.outputs)):
            return super().jacobians(wrt, outputs)

        def served():
            blocks = self.program.jacobians(self.model.point)
            return {(o, n): blocks[(o, n)] for o in outputs for n in wrt}
        return self._served(served, super().jacobians, wrt, outputs)

    def _served(self, product, eager, *args):
        if self.program is not None:
            try:
                return product()
            except Exception:  # noqa: BLE001 - not runnable as a program: eagerly, as cold
                warm.refused(self.entry)
                self.program = None
        return eager(*args)
