"""The quick check of a unit checked by projections (``quick_check``, the
package docstring): ``analyses.check.FastCheck``'s draws, its ``project``
rule (``compare_projections``, ``detectable_error``) and its forward-mode rule
(``forward_wrong``), with every product of the unit taken in *one* call of its
signature's trace (``Traced.probe``): the finite-difference points of all its
inputs and probes (``BatchedDifferences`` plans them, step rule and Richardson
unchanged), the P VJPs and the P JVPs along the joint tangents. The check is
``FastCheck`` itself, given a provider of those products (``TracedProducts``);
what the trace cannot serve raises ``Unsettled`` and the unit goes to
``check_model``. So does a unit whose trace holds a ``tf.custom_gradient``:
its forward mode is taken eagerly and inside a trace there
(``FullCheck.forward_ways``), where the one traced call takes it one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.analyses.layers.batched import BatchedDifferences
from gradcli.numerics.finite_diff import FiniteDifferences
from gradcli.analyses.layers.traces import Traced
from gradcli.analyses.layers.units import PROJECTED
from gradcli.errors import debugging
from gradcli.numerics import held
from gradcli.options import CheckOptions
from gradcli.results import INCONCLUSIVE, PASS, ZERO
from gradcli.verdicts import compare, same_function


@dataclass
class Quick:
    """What the quick check settled: its pairs, the proof and notes, and the
    inputs it left ``unsettled`` (their pairs inconclusive, every other pair
    passing or a confirmed zero): ``check_model`` checks those inputs alone
    (``analyses.layers.run``), not the whole unit again."""

    pairs: list
    proof: object
    notes: list
    unsettled: list = field(default_factory=list)


def quick_check(local, traced: "Traced", options: CheckOptions, draws: "Draws") -> Quick | None:
    """The unit's random projections in one call of its signature's trace
    (the package docstring): a ``Quick`` when every pair passes (or is a
    confirmed zero) or is inconclusive, and the proof finds no other function;
    None sends the unit to ``check_model``. A pair inconclusive at the
    default step (finite differences too noisy to confirm it, an attention
    key's bias whose derivative is 0 in a unit of large outputs) gets the
    round-off retry through the trace (``run_traced``); one still
    inconclusive is no failure found: its input is left to ``check_model``,
    whose element-wise re-check settles what projections cannot, while the
    other inputs keep the quick check's verdicts. ``draws``: the pass's
    ``Draws``, the projections' random numbers."""
    # Imported here: ``analyses.check``'s package runs the layer pass, which
    # imports this module (the check modules named do not).
    from gradcli.analyses.check.fast import FastCheck
    from gradcli.analyses.check.products import ModelProducts

    dtype = str(local.dtype)
    if traced.computes_below(local) or traced.custom_gradients(local):
        # A custom gradient: its JVP taken eagerly and inside a trace may differ
        # (``FullCheck.forward_ways``); ``check_model`` takes both, this call one.
        return None
    tol = compare.tolerance(dtype, options.rtol, options.atol)
    fd = FiniteDifferences(
        local.function, local.point, [PROJECTED], wrt=list(local.wrt), joint=True,
        jit_compile=options.xla, precision=dtype, chunk=options.probes,
        nonsmooth=traced.nonsmooth(local),
    )
    fd.evaluator = BatchedDifferences(fd)  # fd's points: planned, then served (run_traced)
    products = TracedProducts(ModelProducts(local))
    probes = FastCheck(local, [PROJECTED], fd, tol, options, None, products)
    try:
        pairs, first_vjp = run_traced(probes, products, traced, draws)
    except Exception as exc:  # noqa: BLE001 - not traceable, or unsettled: check_model runs it eagerly
        if debugging() and not isinstance(exc, Unsettled):
            raise
        return None
    compare.apply_fail_on(pairs, options.fail_on)
    if not all(p.verdict == INCONCLUSIVE or (p.verdict in (PASS, ZERO) and not p.failed) for p in pairs):
        return None
    proof = same_function.prove(local, options.rng_seed, taken=first_vjp)
    if proof is not None and proof.differs:
        return None
    notes = list(local.notes)
    if proof is not None and not proof.proven:
        notes.append(f"not proven to be the user's function: {proof.detail}")
    if options.autodiff == "reverse":
        notes.append("forward mode (JVPs) not checked: autodiff is 'reverse'")
    return Quick(pairs, proof, notes, [p.input for p in pairs if p.verdict == INCONCLUSIVE])


class Unsettled(Exception):
    """The quick check cannot settle the unit: ``check_model`` will."""


class TracedProducts:
    """A unit's products as its traced call took them (``run_traced``): the
    JVPs along the joint tangents are served from that call; any other set of
    tangents (inputs probed one by one after a joint failure) is
    ``check_model``'s to take (``Unsettled``). VJPs the call did not take come
    from ``fallback`` (``check.products.ModelProducts``), and so do JVPs asked
    for before ``run_traced`` sets ``joint``."""

    def __init__(self, fallback):
        self.fallback = fallback
        self.joint = None  # (input names, JVPs along their joint tangents), set by ``run_traced``

    #: The JVPs come from the traced call, all tangents at once (``FullCheck.eager_shown``).
    eager_jvps = False

    def vjps(self, seeds: list[dict]) -> list[dict]:
        return self.fallback.vjps(seeds)

    def jacobians(self, wrt, outputs) -> dict:
        return self.fallback.jacobians(wrt, outputs)

    def batched_jvp(self, tangents, outputs):
        if self.joint is None:
            return self.fallback.batched_jvp(tangents, outputs)
        names, jvps = self.joint
        if tuple(tangents) != names:
            raise Unsettled()
        return {PROJECTED: jvps}


def run_traced(check, products: TracedProducts, traced: Traced, draws: "Draws") -> tuple[list, tuple]:
    """``check``'s (a ``FastCheck``) projections (the same draws as ``FastCheck.run``) with every
    product of the unit taken in one call of its signature's trace: the
    finite-difference engine plans its points first (``BatchedDifferences``),
    the call evaluates them with the P VJPs and the P JVPs along the joint
    tangents, and the engine then forms its quotients from them. A pair
    inconclusive there gets ``FastCheck.run``'s round-off retry, each larger
    step's points planned and taken in one call of the points alone
    (``Traced.points``). (pairs, the
    first probe's (cotangents, VJP)): that product is the proof's
    (``same_function.prove``'s ``taken``), one backward pass through the trace
    fewer per unit."""
    model, o = check.model, PROJECTED
    wrt = list(model.wrt)
    seeds, drawn, moves = draws.of(check.options.rng_seed, check.options.probes, model.outputs[o].shape,
                                   [model.point[n] for n in wrt])
    cotangents, tangents = {o: seeds}, dict(zip(wrt, drawn))
    plan = check.fd.evaluator.plan_passes(wrt, tangents)
    weights, frozen, cots = model.function.bound
    point = [held.tensor_of(model.point[n]) for n in wrt]
    values, jvps, grads = traced.probe(point, frozen, cots, moves, plan, cotangents[o])
    evaluator = check.fd.evaluator
    numeric = evaluator.serve(wrt, tangents, values)
    reverse = {o: [dict(zip(wrt, g)) for g in grads]}
    first_vjp = ({o: cotangents[o][0]}, reverse[o][0])

    def retried(n: str, scale: float):  # one input's differences at ``scale`` times the step, in one call
        planned = evaluator.plan_passes(wrt, tangents, [n], scale)
        return evaluator.serve(wrt, tangents, traced.points(point, frozen, cots, moves, planned), [n], scale)[n]

    pairs = [
        check.project_retried(n, o, tangents[n], cotangents[o], reverse[o], numeric[n],
                              lambda scale, n=n: retried(n, scale))
        for n in wrt
    ]
    settled = [p for p in pairs if p.verdict != INCONCLUSIVE]
    if any(p.failed for p in settled) or not settled or check.options.autodiff != "both":
        return pairs, first_vjp
    # Forward mode along the settled inputs' joint tangent: the call's own JVPs
    # where that is every input, else JVPs of the same trace along that tangent
    # (the unsettled inputs' tangents zero, no point planned), where the eager
    # JVPs took 4.7 s of a 7.1M-weight BERT layer's 19 (an unsettled input's
    # noisy differences take no part, ``forward_failures``).
    names = [p.input for p in settled]
    if len(settled) < len(pairs):
        import tensorflow as tf

        along = [u if n in names else tf.zeros_like(u) for n, u in zip(wrt, moves)]
        dtype = np.asarray(plan[2]).dtype
        nothing = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, dtype))
        _, jvps, _ = traced.probe(point, frozen, cots, along, nothing, cotangents[o])
    products.joint = (tuple(names), jvps)
    check.check_forward_probes(pairs, tangents, cotangents, numeric, reverse, [o])
    return pairs, first_vjp


class Draws:
    """The random numbers of the layer pass's projections, the same as
    ``FastCheck.run`` draws (from the check's seed: the cotangents, then each
    input's tangents, in order), with the tangents as tensors. Every unit
    draws from the same seed, so units of the same output shape and input
    shapes and dtypes draw the same numbers. The last unit's are kept
    (read-only) and served again while the next unit is of the same
    signature (``release`` drops them otherwise): the twelve transformer
    layers of a BERT-base draw and convert their 21M numbers once, not twelve
    times (0.27 s of drawing and 0.25 s of copying into tensors a layer)."""

    def __init__(self):
        self.key = None
        self.drawn = None

    def release(self) -> None:
        """Drop the kept draws (the next unit is of another signature:
        ``analyses.layers.run``)."""
        self.key = self.drawn = None

    def of(self, seed: int, probes: int, output_shape, points: list) -> tuple:
        """(cotangents [probes, *output_shape], each point's tangents
        [probes, *shape] in its dtype, those tangents as tensors)."""
        key = (seed, probes, tuple(output_shape), tuple((np.shape(x), np.asarray(x).dtype.str) for x in points))
        if key != self.key:
            self.key = self.drawn = None  # the last unit's draws go before the next are made
            rng = np.random.default_rng(seed)
            cotangents = rng.standard_normal((probes,) + tuple(output_shape))
            cotangents.flags.writeable = False  # served again to the next unit of these shapes
            # Each drawn where its tensor keeps it (read-only, ``held.formed_array``):
            # converting GPT-2 small's token embedding's 116M normals took 4.3 s.
            tangents = [held.formed_array((probes,) + np.shape(x), np.asarray(x).dtype, held.normals(rng)) for x in points]
            moves = [held.tensor_of(u) for u in tangents]
            self.key, self.drawn = key, (cotangents, tangents, moves)
        return self.drawn
