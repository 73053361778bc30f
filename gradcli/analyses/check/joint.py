"""The joint whole-model check (``JointCheck``) that runs beside the layer
pass: one pair per output along tangents that move every input at once, with
the kink rules for a failing joint row (``verdicts.joint``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses

import numpy as np

from gradcli.analyses.check.fast import FastCheck, InputSums
from gradcli.analyses.check.raised import raised_in_gradcli
from gradcli.analyses.check.rules import FORWARD_CHECKED, JOINT_CHUNK_BYTES, JOINT_FORWARD_PROBES, RETRY_HELD_CHUNKS
from gradcli.analyses.layers.moves import MOVED, moved_off
from gradcli.model.loading import host_array, run_model
from gradcli.numerics import autodiff, held
from gradcli.numerics.difference_rule import Derivatives
from gradcli.results import INCONCLUSIVE, PairResult
from gradcli.verdicts import compare, diagnose
from gradcli.verdicts.joint import judge_joint_kinks


class JointCheck(FastCheck):
    """The whole-model fast check along joint directions, for a model checked
    layer by layer (``analyses.layers``): each probe's tangent moves every
    input at once, so the finite differences cost one set of evaluations of the
    model (2 steps x 2 levels x probes) whatever its number of inputs, where the
    input-by-input check costs that per input (a ResNet-50 has 321). One pair
    per output, its input ``joint_input(n)``: v^T J u against the sum over the
    inputs of <u_n, J_n^T v>, by ``compare_projections`` (power included), and
    forward mode along the same tangents by ``forward_wrong``. A random joint
    tangent and cotangent see an error in any block (errors in two blocks
    cancel with probability zero); the stated power is the joint projection's,
    weaker than one input's alone, and where the error is is the layer table's
    to say: a failing joint pair is not re-checked element by element."""

    nearby = False  # this check runs at the nearby point (``verdicts.joint.judge_nearby``)

    def run(self) -> list[PairResult]:
        model = self.model
        draws = self.draws = JointDraws(model, self.outputs, self.options.probes, self.options.rng_seed, self.fd)
        label = joint_input(len(model.wrt))
        parts, sums, wrong = [], {o: [] for o in self.outputs}, {}
        for chunk in draws.chunks:  # one chunk of probes' directions held at a time
            tangents = draws.tangents(chunk)
            parts.append(self.fd.along_joint(tangents))
            for o in self.outputs:
                reverse = self.vjps([{o: draws.cotangents[o][p]} for p in chunk])
                sums[o].append(self.joint_sums(tangents, reverse, chunk, wrong.setdefault(o, [])))
            del tangents  # this chunk's directions, before the next is drawn
        numeric = Derivatives.joined(parts)
        probes = draws.probes
        flat = lambda a: np.asarray(a).reshape(probes, -1)  # noqa: E731
        pairs, larger = [], {}  # larger: the round-off retry's derivatives, by step scale
        for o in self.outputs:
            if wrong[o]:  # compare's shape rule, naming the input (the first in input, then probe, order)
                _, n, got = min(wrong[o], key=lambda w: w[0])
                pairs.append(compare.wrong_shape(n, o, "fast", got.expected, got.got))
                continue
            side = InputSums.joined(sums[o])
            v = flat(draws.cotangents[o])
            pair = self.compare_projection(label, o, side, v, flat(numeric.values[o]), flat(numeric.errors[o]))
            if pair.verdict == INCONCLUSIVE:  # FastCheck's round-off retry, along the joint tangents

                def projected_at(scale):  # called here, in this output's iteration
                    if scale not in larger:  # one set of evaluations serves every output
                        larger[scale] = self.along_joint(scale)
                    return self.compare_projection(label, o, side, v, flat(larger[scale].values[o]),
                                                   flat(larger[scale].errors[o]))

                with draws.holding(RETRY_HELD_CHUNKS):  # the scales' passes draw fewer chunks again
                    pair = self.retry_larger_step(pair, projected_at)
            analytic = side.analytic
            forward = self.options.autodiff == "both"
            worst, agreed, taken = None, False, False
            if pair.failed and pair.reverse_failed and self.fd.nonsmooth:
                if forward and not self.layer_verdict.done():
                    # The layer pass still runs beside: the forward-mode product
                    # is taken while it ends, not after (a failing layer keeps
                    # the row as it is, and forward mode is then checked).
                    worst, agreed = self.checked_joint_forward(pair, draws.cotangents[o], o, numeric, analytic)
                    taken = True
                if self.layer_verdict.result():
                    pair.warnings.append(
                        "not examined for kinks along the probes: a failing layer in the layer table "
                        "explains a failing joint row"
                    )
                else:
                    self.settle_on_kinks(pair, v, o, analytic)
            if pair.verdict in FORWARD_CHECKED and forward:
                if not taken:
                    worst, agreed = self.checked_joint_forward(pair, draws.cotangents[o], o, numeric, analytic)
                if worst is not None:
                    compare.mark_forward_failure(pair, *worst)
                elif agreed:
                    taken_along = ", ".join(str(p) for p in range(JOINT_FORWARD_PROBES))
                    compare.mark_forward_agreement(pair, f"along joint probe {taken_along}")
            pairs.append(pair)
        unsettled = [p for p in pairs if p.verdict == INCONCLUSIVE]
        if unsettled and not self.nearby and not self.layer_verdict.result():
            pairs = self.input_by_input(pairs, unsettled)
        return pairs

    def joint_sums(self, tangents, reverse, chunk, wrong: list) -> InputSums:
        """The joint input's sums (``InputSums``) over one chunk of probes:
        each input's <u_n, J_n^T v>, |u_n|^2 and |J_n^T v|^2 added up, input
        by input (never the inputs' directions joined into one copy). A
        disconnected input adds 0 to <u, J^T v> and |J^T v|^2; an input whose
        gradient has another shape is appended to ``wrong`` as
        ((input index, probe), name, ``WrongShape``)."""
        model, k = self.model, len(chunk)
        analytic, u_squares, jtv_squares = np.zeros(k), np.zeros(k), np.zeros(k)
        for i, n in enumerate(model.wrt):
            u = np.asarray(tangents[n]).reshape(k, -1)
            u_squares += compare.squared_norms(u)
            grads = [autodiff.checked_gradient(r[n], np.shape(model.point[n])) for r in reverse]
            wrong += [((i, p), n, g) for p, g in zip(chunk, grads) if isinstance(g, autodiff.WrongShape)]
            if any(g is None or isinstance(g, autodiff.WrongShape) for g in grads):
                continue
            analytic += compare.row_dots(u, grads)
            jtv_squares += compare.squared_norms(grads)
        dtype = np.result_type(*(np.asarray(model.point[n]).dtype for n in model.wrt))
        return InputSums(analytic, u_squares, jtv_squares, sum(int(np.size(model.point[n])) for n in model.wrt),
                         dtype)

    def along_joint(self, step_scale: float = 1.0):
        """``fd.along_joint`` along every probe's joint tangent, a chunk of
        probes at a time (``JointDraws``), at ``step_scale`` times the step:
        the chunks the draws hold first (``JointDraws.held_first``), joined in
        probe order (each chunk's differences are its own)."""
        draws = self.draws
        parts = {c.start: self.fd.along_joint(draws.tangents(c), step_scale=step_scale)
                 for c in draws.held_first(draws.chunks)}
        return Derivatives.joined([parts[c.start] for c in draws.chunks])

    def input_by_input(self, pairs, unsettled) -> list[PairResult]:
        """Joint rows still inconclusive after the round-off retry, where no
        layer of the layer table fails to explain them, settled as the fast
        check settles a model: input by input (``FastCheck.run``, the same
        draws), whose inconclusive pairs are re-checked element by element.
        A joint projection sums the finite differences' noise of every input
        at once (a model that computes in float32 inside, keras-hub's Llama);
        one input's projection carries only its own."""
        outputs = {p.output for p in unsettled}
        rows = "; ".join(f"{p.input} -> {p.output}: {p.explanation}" for p in unsettled)
        self.notes.append(f"the whole-model joint check stayed inconclusive after the round-off retry ({rows}): "
                          "the whole model checked input by input instead")
        checked = [p for p in FastCheck.run(self) if p.output in outputs]
        return [p for p in pairs if p.output not in outputs] + checked

    def settle_on_kinks(self, pair, v, o, analytic) -> None:
        """A failing joint probe through non-smooth ops (``fd.nonsmooth``): the
        one-sided slopes along it by the ladder rule
        (``diagnose.directional_slopes``), projected by its cotangent and read
        by ``diagnose.slope_tests``; the verdict is
        ``verdicts.joint.judge_joint_kinks``' (a pass, ``kink``,
        ``inconclusive``, or the nearby-point rule, ``at_nearby_point``)."""
        probes = sorted({int(e.input_index[0]) for e in pair.failing})
        if not probes:
            return
        tangents = self.draws.tangents(probes)
        _, _, h = self.fd.joint_steps(tangents)  # each direction's step is its own: as along every probe
        left, right, left_err, right_err = diagnose.directional_slopes(
            self.fd, tangents, h, self.model.outputs[o], o,
        )
        w = v[probes]  # [probes, out]: the cotangents project the slopes
        L, R = np.sum(w * left.T, axis=1), np.sum(w * right.T, axis=1)
        eL, eR = np.sum(np.abs(w) * left_err.T, axis=1), np.sum(np.abs(w) * right_err.T, axis=1)
        a = analytic[probes]
        gap, settled, between, agrees = diagnose.slope_tests(a, L, R, eL, eR, self.tol)
        slopes = "; ".join(f"probe {p}: left {l:.6g}, right {r:.6g}, analytic {x:.6g}" for p, l, r, x in zip(probes, L, R, a))
        nearby = None if self.nearby else (lambda: self.at_nearby_point(o))  # once: not from the nearby point
        judge_joint_kinks(pair, len(probes), gap, settled, between, agrees, slopes, nearby, MOVED)

    def at_nearby_point(self, o):
        """The joint pair of output ``o`` at the point moved off its kinks
        (``verdicts.joint.judge_nearby``): the same function, the same draws
        and step rule."""
        model = self.model
        rng = np.random.default_rng([self.options.rng_seed, 3])
        point = {n: moved_off(v, rng) if n in model.wrt else v for n, v in model.point.items()}
        nearby = dataclasses.replace(model, point=point, taken_vjp=None, notes=[])
        nearby.outputs = {k: host_array(v) for k, v in run_model(nearby, point).items()}
        fd = self.fd.anew(point=point, center=nearby.outputs)
        check = JointCheck(nearby, [o], fd, self.tol, self.options, self.graph)
        check.nearby = True
        (pair,) = check.run()
        self.fd.evaluations += fd.evaluations
        return pair

    def checked_joint_forward(self, pair, cotangents, o, numeric, reverse):
        """Forward mode along the first ``JOINT_FORWARD_PROBES`` joint tangents
        (``forward_probe``'s rule), taken every way of ``forward_ways``: the
        worst failing probe (or None) and whether forward mode was taken and
        agreed; a forward pass that raises leaves the pair standing, with a
        warning (no failure, no agreement)."""
        k = JOINT_FORWARD_PROBES
        tangents = self.draws.tangents(range(k))

        def take() -> dict:
            jvp = self.batched_jvp(tangents, [o])[o]
            worst = self.forward_probe(
                tangents, cotangents[:k], jvp, [(numeric.values[o][:k], numeric.errors[o][:k])], reverse[:k]
            )
            return {} if worst is None else {o: worst}

        try:
            worst = self.each_forward_way([pair], take).get(o)
            return worst, worst is None
        except Exception as exc:  # forward mode raised: the reverse-mode verdict stands
            if raised_in_gradcli(exc):
                raise
            pair.warnings.append(
                f"forward mode could not be checked: {diagnose.raised(exc, self.model, True, forward=True)}"
            )
            return None, False

class JointDraws:
    """The joint check's random draws, as ``FastCheck.run`` draws them from one
    generator: each output's cotangents ``[probes, *shape]`` (held: an
    output's size), then each input's tangents ``[probes, *shape]``, given a
    chunk of probes at a time (``tangents``). Every probe's directions of a
    model of 109M weights are 0.88 GB in float64; a chunk holds as many
    probes as ``JOINT_CHUNK_BYTES`` (all of them, for any model but a large
    one), and a later chunk is drawn again from the generator's state
    recorded before each (input, probe): normals drawn in parts are the
    normals drawn at once, so the directions are the same however they are
    chunked. A chunk's tangents are views into one block laid out as the
    finite differences move the inputs (``fd.laid_out``), so the differences
    along them copy nothing."""

    def __init__(self, model, outputs, probes: int, seed, fd):
        rng = np.random.default_rng(seed)  # the draws of FastCheck.run
        self.cotangents = {o: rng.standard_normal((probes,) + np.shape(model.outputs[o])) for o in outputs}
        self.probes, self.fd = probes, fd
        self.inputs = {n: np.shape(model.point[n]) for n in model.wrt}
        per_probe = sum(int(np.size(model.point[n])) * np.asarray(model.point[n]).dtype.itemsize for n in model.wrt)
        per_chunk = joint_chunk_probes(per_probe, probes)
        self.chunks = [range(s, min(s + per_chunk, probes)) for s in range(0, probes, per_chunk)]
        self._rng, self._held, self._states = rng, None, {}
        #: chunks' directions held: the first chunk's from the recording pass
        #: until the next is drawn, and up to ``_keep`` after they are served
        #: (``holding``), least recently served first: probes -> directions
        self._kept: collections.OrderedDict = collections.OrderedDict()
        self._keep = 0
        if len(self.chunks) == 1:
            self._held = fd.laid_out(model.wrt, rows=probes)
            for n in self.inputs:  # input by input, every probe: FastCheck.run's order
                for p in range(probes):  # drawn in place (GPT-2 small's directions: 0.99 GB a probe)
                    held.normals(rng)(self._held[n][p:p + 1])
            _read_only(self._held)  # served again to every caller, not copied
            return
        # One pass to record where each probe's normals start. It draws the
        # first chunk's directions where that chunk is held (the first pass
        # takes them from here, ``tangents``; the next chunk drawn releases
        # them), and every other probe's into one scratch array: the same
        # normals, drawn once each, without a fresh array for each (input,
        # probe) (BERT-base: 199 inputs x 3 probes).
        first = self.chunks[0]
        directions = fd.laid_out(self.inputs, rows=len(first))
        sizes = {n: int(np.prod(shape, dtype=np.int64)) for n, shape in self.inputs.items()}
        scratch = np.empty(max(sizes.values()))
        for n in self.inputs:
            for p in range(probes):
                self._states[n, p] = rng.bit_generator.state
                row = p - first.start
                held.normals(rng)(directions[n][row:row + 1] if p in first else scratch[:sizes[n]])
        self._kept[tuple(first)] = _read_only(directions)

    def tangents(self, probes) -> dict:
        """Each input's tangents of ``probes`` (indices), ``[len(probes), *shape]``:
        views into one block (``fd.laid_out``)."""
        probes = list(probes)
        if self._held is not None:
            if probes == list(range(self.probes)):
                return self._held
            return self.fd.laid_out(self.inputs, block=self._held.block[probes])
        key = tuple(probes)
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        # Room first, so that at most ``_keep`` chunks' directions are alive
        # while these are drawn (a request that is no chunk may be larger: none).
        chunk = any(key == tuple(c) for c in self.chunks)
        while self._kept and (not chunk or len(self._kept) >= self._keep):
            self._kept.popitem(last=False)
        taken = self.fd.laid_out(self.inputs, rows=len(probes))
        for n, shape in self.inputs.items():
            for row, p in enumerate(probes):
                self._rng.bit_generator.state = self._states[n, p]
                held.normals(self._rng)(taken[n][row:row + 1])
        if chunk and self._keep:
            self._kept[key] = _read_only(taken)
        return taken

    @contextlib.contextmanager
    def holding(self, chunks: int):
        """Up to ``chunks`` chunks' directions held after they are served, for
        the duration (the round-off retry's passes, ``RETRY_HELD_CHUNKS``), and
        released at its end. Each is drawn again otherwise: 1.3 s a probe of
        BERT-base's 109M weights."""
        self._keep = chunks
        try:
            yield
        finally:
            self._keep = 0
            self._kept.clear()

    def held_first(self, chunks) -> list:
        """``chunks`` in the order a pass draws fewest: those held now first
        (least recently served first, so each is served before it would make
        room), then the others in order."""
        held = [c for key in self._kept for c in chunks if tuple(c) == key]
        return held + [c for c in chunks if c not in held]


def _read_only(directions):
    """``directions`` (``fd.laid_out``) made read-only: served again, not copied."""
    for array in [directions.block, *directions.values()]:
        array.flags.writeable = False
    return directions


def joint_chunk_probes(bytes_per_probe: int, probes: int) -> int:
    """Probes whose joint directions ``JointDraws`` holds at once: as many as
    ``JOINT_CHUNK_BYTES`` holds, at least one."""
    return max(1, min(probes, JOINT_CHUNK_BYTES // max(bytes_per_probe, 1)))


def joint_input(count: int) -> str:
    """The input named by a joint pair (``JointCheck``)."""
    return f"all {count} inputs jointly"
