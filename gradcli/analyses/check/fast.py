"""The fast check (``FastCheck``): random projections v^T J u per pair
(reverse mode against finite differences along u, forward mode along the
joint tangent of all inputs), the round-off retry, and an element-wise
re-check of a failing pair (in full, or on a sample of its elements that fits
its share of the budget) so the report can name elements.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcli import progress
from gradcli.analyses.check.full import FullCheck
from gradcli.analyses.check.rules import MIN_SAMPLED, SHOWN_FIRST, UNEXPLAINED_BUDGETS
from gradcli.model.loading import Model
from gradcli.numerics import autodiff
from gradcli.results import INCONCLUSIVE, PASS, PairResult
from gradcli.verdicts import compare


#: The progress stage of the element-wise re-checks of failing inputs
#: (``FastCheck.run``), counted in inputs.
RECHECK_STAGE = "element-wise re-checks"


class FastCheck(FullCheck):
    """Random projections v^T J u, with a full check of any pair that fails."""

    def run(self) -> list[PairResult]:
        model, probes = self.model, self.options.probes
        rng = np.random.default_rng(self.options.rng_seed)
        cotangents = {
            o: rng.standard_normal((probes,) + model.outputs[o].shape) for o in self.outputs
        }
        # Reverse mode: one VJP per (output, probe) gives J^T v for every input.
        reverse = {o: self.vjps([{o: v[p]} for p in range(probes)]) for o, v in cotangents.items()}
        tangents = {
            n: rng.standard_normal((probes,) + model.point[n].shape).astype(model.point[n].dtype, copy=False)
            for n in model.wrt
        }
        pairs, numeric, failing = [], {}, {}
        for name in model.wrt:
            numeric[name] = self.fd.along(name, tangents[name])
            for o in self.outputs:
                pair = self.project_retried(
                    name, o, tangents[name], cotangents[o], reverse[o], numeric[name],
                    lambda scale: self.fd.along(name, tangents[name], step_scale=scale))
                # A projection still too noisy to judge is settled element by
                # element too: each element's differences resolve what a
                # projection over every element at once could not (an
                # embedding table in a model that computes in float32 inside).
                if pair.failed and (pair.reverse_failed or pair.verdict == INCONCLUSIVE):
                    failing.setdefault(name, []).append(o)
                pairs.append(pair)
        # Every input's projections first, then the re-checks: they share the
        # budget (``RecheckBudget``), so each must know how many there are.
        budget = RecheckBudget(self.options.budget, len(failing))
        for done, (name, failed_outputs) in enumerate(failing.items()):
            # A stage of its own, a layer pass's unit included: a unit whose
            # inputs fail runs far longer than its pass's other units (a
            # wrong GELU in BERT-base: 70 s, against 2 s), and its lines say why.
            # Each names the input (a unit's names hold its layer's path).
            progress.report(RECHECK_STAGE, done, len(failing), name)
            try:
                pairs = self.replace_with_full(pairs, name, failed_outputs, budget)
            except BaseException:  # the stage ends with the check that raised
                progress.report(RECHECK_STAGE, len(failing), len(failing), name)
                raise
            progress.report(RECHECK_STAGE, done + 1, len(failing), name)
        if self.options.autodiff == "both":
            self.check_forward_probes(pairs, tangents, cotangents, numeric, reverse, self.outputs)
        return pairs

    def check_forward_probes(self, pairs, tangents, cotangents, numeric, reverse, outputs) -> None:
        """Forward mode along the fast check's own probes: the numeric J u of each
        input (``numeric[n]``, already taken) and <u, J^T v> from its reverse-mode
        products (``reverse[o][p][n]``; a wrong shape or None counts 0, its pair
        says so), then ``forward_failures``' rule."""
        wrt = list(tangents)
        along = {o: {n: (numeric[n].values[o], numeric[n].errors[o]) for n in wrt} for o in outputs}
        # Each <u_p, J^T v_p> as the projections take it (``compare.row_dots``):
        # the summed product of GPT-2 small's token embedding made three 309 MB arrays.
        reverse_projection = {
            o: {
                n: np.array([
                    float(compare.row_dots([tangents[n][p]], [r[n]])[0])
                    if isinstance(r[n], np.ndarray) and r[n].shape == tangents[n][p].shape else 0.0
                    for p, r in enumerate(reverse[o])
                ])
                for n in wrt
            }
            for o in outputs
        }
        self.mark_forward(pairs, *self.checked_forward(pairs, tangents, cotangents, along, reverse_projection))

    def project_retried(self, name, o, tangents, cotangents, reverse, numeric, along_at) -> PairResult:
        """``project``, and for a pair inconclusive there the round-off retry
        (``retry_larger_step``), its differences at each larger step
        ``along_at(scale)``."""
        pair = self.project(name, o, tangents, cotangents, reverse, numeric)
        if pair.verdict != INCONCLUSIVE:
            return pair
        return self.retry_larger_step(
            pair, lambda scale: self.project(name, o, tangents, cotangents, reverse, along_at(scale)))

    def project(self, name, o, tangents, cotangents, reverse, numeric) -> PairResult:
        """One pair's probes in reverse mode against finite differences."""
        probes = len(tangents)
        flat = lambda a: np.asarray(a).reshape(probes, -1)  # noqa: E731
        u, v = flat(tangents), flat(cotangents)
        shape = np.shape(self.model.point[name])
        grads = [autodiff.checked_gradient(r[name], shape) for r in reverse]
        wrong = next((g for g in grads if isinstance(g, autodiff.WrongShape)), None)
        if wrong is not None:  # compare's shape rule: never broadcast it into the probe
            return compare.wrong_shape(name, o, "fast", wrong.expected, wrong.got)
        disconnected = any(g is None for g in grads)
        side = InputSums.of(u, None if disconnected else grads)
        return self.compare_projection(name, o, side, v, flat(numeric.values[o]), flat(numeric.errors[o]))

    def compare_projection(self, label, o, side: "InputSums", v, ju_numeric, errors) -> PairResult:
        """Reverse mode's <u, J^T v> (``side``, the input side's sums) against
        finite differences' v^T J u (``ju_numeric`` and its ``errors``,
        ``[probes, outputs]``), by ``compare_projections``' rule."""
        v_squares = compare.squared_norms(v)
        scale, roundoff = compare.projection_scale(
            side.u_squares, v_squares, compare.squared_norms(ju_numeric), side.jtv_squares, side.dtype
        )
        return compare.compare_projections(
            label, o,
            side.analytic,
            None,
            np.sum(v * ju_numeric, axis=1),
            np.sum(np.abs(v) * errors, axis=1),
            scale,
            self.tol,
            roundoff,
            np.sqrt(side.u_squares) * np.sqrt(v_squares),
            # The RMS element of the [outputs x inputs] block: ||J||_F / sqrt(m n).
            element_size=float(scale[0]) / np.sqrt(side.size * v.shape[1]),
        )

    def replace_with_full(self, pairs, name, outputs, budget: "RecheckBudget") -> list[PairResult]:
        """Re-check failing (or inconclusive) pairs element by element, so the
        report names elements, within this input's share of the budget
        (``budget``).

        The re-check builds dense blocks (the analytic ones, and the numeric
        block of every output by ``name``), so it asks the memory rule first
        (``gradcli.memory.over_limit``, the prediction of a full check): when
        they would not fit, the fast result stands with a note saying why."""
        from gradcli.memory import dense_bytes, over_limit

        judged = [p for p in pairs if p.input == name and p.output in outputs]
        outcome = "was inconclusive" if all(p.verdict == INCONCLUSIVE for p in judged) else "failed"
        rows = sum(int(np.size(self.model.outputs[o])) for o in self.outputs)
        elements = int(np.size(self.model.point[name]))
        over = over_limit(dense_bytes(rows * elements, np.dtype(self.model.dtype).itemsize),
                          self.options.max_memory)
        if over is not None:
            for p in pairs:
                if p.input == name and p.output in outputs:
                    p.warnings.append(
                        f"fast check {outcome}; the element-wise re-check ({rows} x {elements} "
                        f"blocks) would need {over}: the fast result is shown"
                    )
            return pairs
        sample, predicted, first = self.sample_within_budget(name, elements, budget.share)
        shown = f"fast check {outcome}; element-wise comparison shown"
        if sample is not None:
            checked, count = self.sampled_pairs(name, outputs, sample, budget.share, first)
            if not any(p.failed for p in checked) and predicted <= UNEXPLAINED_BUDGETS * budget.share:
                shown += (
                    f" (a sample of {count} elements showed none outside tolerance; all {elements}, "
                    f"predicted {predicted:.2g} s, within {UNEXPLAINED_BUDGETS:g} {budget.unit}s)"
                )
                sample = None
        if sample is None:
            analytic = self.reverse_jacobians([name], outputs)
            full = {p.output: p for p in self.pairs_for(name, outputs, analytic)}
        else:
            full = {p.output: p for p in checked}
            shown = (
                f"fast check {outcome}; element-wise comparison of {count} of its {elements} elements, drawn "
                f"at random (all of them would take about {predicted:.2g} s, over {budget.words}): "
                f"the counts are the sample's"
            )
        power = {p.output: p.power for p in pairs if p.input == name}
        for p in full.values():
            p.warnings.append(shown)
            p.power = power.get(p.output)  # what the fast check that found it could see
            if sample is not None and not p.failed:  # the projections' failure stands
                fast = next(q for q in pairs if q.input == name and q.output == p.output)
                fast.warnings.append(f"{shown}; none of them is outside tolerance: the fast result is shown")
                full[p.output] = fast
        return [
            full[p.output] if p.input == name and p.output in full else p for p in pairs
        ]

    def sample_within_budget(self, name, elements, seconds: float) -> tuple:
        """(flat element indices, predicted seconds of all, how many of them to
        check first or None) for an element-wise re-check that would not fit
        ``seconds`` (the input's share of the budget, ``RecheckBudget``), or
        (None, None, None). Rule: a failing pair is
        re-checked on every element when the first pass along every axis is
        predicted (``FiniteDifferences.predict_axes_seconds``) to fit
        ``seconds``; else on a random sample of ``elements * seconds /
        predicted`` of them (at least ``MIN_SAMPLED``), so that a wrong kernel
        of a real-size layer (590k elements: about 40 minutes in full) is shown
        by elements within the budget. The projections found the error; the
        sample shows where it is, as far as it reaches. A sample the floor
        raised above what ``seconds`` buys is checked that many first (at
        least ``SHOWN_FIRST``), the rest only if they name no element."""
        # Past this figure the sample is MIN_SAMPLED elements and no element-wise
        # re-check follows it (``replace_with_full``): a quick timing says so.
        decided = seconds * max(UNEXPLAINED_BUDGETS, elements / MIN_SAMPLED)
        predicted = self.fd.predict_axes_seconds([name], beyond=decided)
        if predicted is None or predicted <= seconds:
            return None, None, None
        bought = int(elements * seconds / predicted)
        count = min(elements, max(MIN_SAMPLED, bought))
        first = max(SHOWN_FIRST, bought)
        rng = np.random.default_rng([self.options.rng_seed, 4])
        return rng.choice(elements, count, replace=False), predicted, (first if first < count else None)

    def sampled_pairs(self, name, outputs, drawn, seconds: float,
                      first: int | None = None) -> tuple[list[PairResult], int]:
        """``pairs_for`` on the elements ``drawn`` (in the order drawn) of input
        ``name`` alone: the model as a function of those elements (the others
        fixed at the point, ``sampled_model``), checked by the same rules
        (steps, ladders, kinks, culprit), its element indices mapped back to
        the input's, and the sample's size. A direction of that function
        costs more than one of the whole input (a scatter of the sample, and
        no XLA for fewer directions): its own first pass is timed, and the
        sample cut to the budget's share when it would not fit.

        The function's elements are in the order drawn, so every prefix of
        the sample is itself a random sample, and a cut is a prefix: it keeps
        at least the elements the timing evaluated (``timed_rows``), whose
        first pass the cut check takes as it is (``take_timed``). Cut below
        them, as the sorted sample was, the timing's chunks were thrown away
        and evaluated again (a wrong GELU inside BERT-base: a chunk of 488
        directions of a transformer layer, for each of its nine failing
        inputs).

        ``first``: the prefix checked first (``SHOWN_FIRST``' rule): its
        result stands when it shows an element outside tolerance; else the
        whole sample is checked, its first chunk that prefix's first pass,
        evaluated once for both."""
        shape = np.shape(self.model.point[name])

        def checker(sample, chunk=None):
            sub = sampled_model(self.model, name, sample)
            fd = self.fd.anew(function=sub.function, point=sub.point, wrt=[name],
                              jit_compile=self.fd.jit_compile or False, chunk=chunk or self.fd.chunk)
            return FullCheck(sub, outputs, fd, self.tol, self.options, self.graph)

        sample = np.asarray(drawn)
        if first is not None and first < len(sample):
            # Chunks of ``first`` in both: the prefix's first pass is one chunk,
            # and the whole sample's first chunk is the same, kept ahead for both.
            shown = checker(sample[:first], chunk=first)
            shown.fd.first_pass_ahead(name, np.arange(first))
            check = checker(sample, chunk=first)
            check.fd.take_timed(shown.fd)
            pairs = shown.pairs_for(name, outputs, shown.reverse_jacobians([name], outputs))
            self.fd.evaluations += shown.fd.evaluations
            if any(p.failed for p in pairs):
                return _sample_indices(pairs, sample[:first], shape), first
        else:
            check = checker(sample)
            predicted = check.fd.predict_axes_seconds([name])
            if predicted is not None and predicted > seconds and len(sample) > MIN_SAMPLED:
                keep = max(MIN_SAMPLED, int(len(sample) * seconds / predicted),
                           check.fd.timed_rows(name))
                if keep < len(sample):
                    self.fd.evaluations += check.fd.evaluations
                    timed = check.fd
                    sample = sample[:keep]
                    check = checker(sample)
                    check.fd.take_timed(timed)
        pairs = check.pairs_for(name, outputs, check.reverse_jacobians([name], outputs))
        self.fd.evaluations += check.fd.evaluations
        return _sample_indices(pairs, sample, shape), len(sample)


def _sample_indices(pairs: list[PairResult], sample, shape) -> list[PairResult]:
    """``pairs`` of a sampled model (``sampled_model``) with their elements'
    input indices mapped back to the whole input's (``shape``)."""
    for pair in pairs:
        for element in [*pair.failing, *pair.kinks, *([pair.worst] if pair.worst else [])]:
            if element.input_index:
                flat = int(sample[int(element.input_index[0])])
                element.input_index = [int(i) for i in np.unravel_index(flat, shape)]
    return pairs


@dataclasses.dataclass(frozen=True)
class RecheckBudget:
    """The seconds each failing input's element-wise re-check may take
    (``FastCheck.replace_with_full``). Rule: the re-checks of one check share
    its budget, ``seconds / inputs`` each. The budget is what the user waits
    for the check; a unit whose many inputs fail from one cause spent a
    budget on each: a wrong GELU inside a BERT-base transformer layer fails 9
    of its 17 inputs, and its layer's check took 141 s, 70 s with the budget
    shared. A sample keeps its floor (``MIN_SAMPLED``), so each failing input
    still names elements."""

    seconds: float
    inputs: int

    @property
    def share(self) -> float:
        return self.seconds / max(self.inputs, 1)

    @property
    def unit(self) -> str:
        """What the escalation rule's multiple counts (``UNEXPLAINED_BUDGETS``)."""
        return "budget" if self.inputs <= 1 else "share"

    @property
    def words(self) -> str:
        if self.inputs <= 1:
            return f"the {self.seconds:g} s budget"
        return (f"its {self.share:.2g} s share of the {self.seconds:g} s budget, which the re-checks "
                f"of {self.inputs} failing inputs share")


@dataclasses.dataclass
class InputSums:
    """The input side of a pair's probes as the projection rule reads it
    (``FastCheck.compare_projection``), per probe: a_p = <u, J^T v> (None:
    disconnected), |u|^2 and |J^T v|^2; and the input's size and dtype.
    Sums, not vectors: the joint input's are the sums over its inputs
    (``JointCheck``), taken a chunk of probes at a time."""

    analytic: np.ndarray | None
    u_squares: np.ndarray
    jtv_squares: np.ndarray
    size: int
    dtype: np.dtype

    @classmethod
    def joined(cls, parts: list["InputSums"]) -> "InputSums":
        """The sums of every part's probes, in order."""
        if len(parts) == 1:
            return parts[0]
        analytic = None if any(p.analytic is None for p in parts) else np.concatenate([p.analytic for p in parts])
        return cls(analytic, np.concatenate([p.u_squares for p in parts]),
                   np.concatenate([p.jtv_squares for p in parts]), parts[0].size, parts[0].dtype)

    @classmethod
    def of(cls, u, jtv) -> "InputSums":
        """The sums of ``u`` (``[probes, size]``) and ``jtv`` (one array per probe;
        None: disconnected, |J^T v| = 0)."""
        return cls(
            None if jtv is None else compare.row_dots(u, jtv),
            compare.squared_norms(u),
            np.zeros(len(u)) if jtv is None else compare.squared_norms(jtv),
            int(u.shape[1]), u.dtype,
        )


def sampled_model(model: Model, name: str, sample) -> Model:
    """``model`` as a function of the elements ``sample`` (flat indices) of
    input ``name``, the rest of it fixed at the point: one input of that name,
    a vector; the other inputs as they are (``FastCheck.sampled_pairs``)."""
    import tensorflow as tf

    x = np.asarray(model.point[name])
    base, where = tf.constant(x.reshape(-1)), tf.constant(np.asarray(sample)[:, None])

    def function(values: dict) -> dict:
        flat = tf.tensor_scatter_nd_update(base, where, values[name])
        return model.function({**values, name: tf.reshape(flat, x.shape)})

    sub = dataclasses.replace(model, function=function, point={**model.point, name: x.reshape(-1)[sample]},
                              wrt=[name], taken_vjp=None, notes=[])
    sub.outputs = model.outputs
    return sub
