"""The full check (``FullCheck``): every element of every (input, output)
Jacobian block against finite differences along every axis, forward mode on a
few random probes at no extra evaluation, and the cotangent rule on the
pairs that pass. The fast and joint checks (``fast``, ``joint``) build on its
rules. Its products (VJPs, JVPs) come from a provider (``products``), so a
caller that takes them elsewhere (the layer pass's traced call) passes its own.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future

import numpy as np

from gradcli import progress
from gradcli.analyses.check.products import ModelProducts
from gradcli.analyses.check.raised import raised_in_gradcli
from gradcli.analyses.check.rules import (
    COTANGENT_SCALES, FORWARD_CHECKED, FORWARD_PROBES, JVP_SHOWN_EQUAL_ULPS, JVP_SHOWN_MARGIN, ROUNDOFF_RETRY,
    WINDOW,
)
from gradcli.model.core import first_cotangents, first_line
from gradcli.numerics import autodiff
from gradcli.numerics.difference_rule import machine_eps
from gradcli.results import INCONCLUSIVE, MISMATCH, PASS, BlockWindow, PairResult
from gradcli.verdicts import compare, diagnose, diagnosis


#: How a forward-mode failure found only one other way says so (``FullCheck.forward_ways``).
EAGER_FUNCTIONS = "with the model's tf.functions run eagerly"
TRACED_JVP = "with the JVP taken inside a tf.function (as a compiled JVP or HVP takes it)"


def model_stage(model, name: str):
    """``progress.stage`` of the whole model's work (``name``, detail the
    model's name); a unit of the layer pass (``Model.unit``) reports none:
    the pass is its own stage, "layers"."""
    return contextlib.nullcontext() if model.unit else progress.stage(name, model.name)


def settled_future(value) -> Future:
    """A Future that already holds ``value``."""
    future: Future = Future()
    future.set_result(value)
    return future


class FullCheck:
    """Every element of every (input, output) Jacobian block."""

    #: Whether the layer pass failed a layer, a Future (``JointCheck`` reads
    #: it; it waits for the pass when the check runs beside it, ``check_model``)
    layer_verdict: Future = settled_future(False)

    def __init__(self, model, outputs, fd, tol, options, graph=None, products=None):
        self.model, self.outputs, self.fd, self.tol, self.options = model, outputs, fd, tol, options
        self.graph = graph
        #: Where J^T c and J t come from (``products``): the model's own
        #: autodiff unless the caller serves them (the layer pass's trace).
        self.products = ModelProducts(model) if products is None else products
        #: What the check says of the whole model beyond its pairs (the model's notes).
        self.notes: list[str] = []

    def run(self) -> list[PairResult]:
        with model_stage(self.model, "reverse mode"):
            analytic = self.reverse_jacobians(self.model.wrt, self.outputs)
        self.columns = {}  # input -> its numeric Jacobian columns (``pairs_for``)
        self.fd.plan_axes(self.model.wrt)
        pairs = [
            pair
            for name in self.model.wrt
            for pair in self.pairs_for(name, self.outputs, analytic)
        ]
        if self.options.autodiff == "both":
            with model_stage(self.model, "forward mode"):
                self.check_forward_mode(pairs, analytic)
        return pairs

    def check_forward_mode(self, pairs, analytic) -> None:
        """Forward mode (JVPs) in the full check, at no extra evaluation: a few
        random tangents u and cotangents v (``FORWARD_PROBES``, from the check's
        seed); the numeric J u is the same combination of the numeric columns
        (with |u| times their error estimates), the reverse-mode J u comes from
        the analytic blocks. The rule is ``forward_failures``'."""
        model, rng = self.model, np.random.default_rng([self.options.rng_seed, 1])
        k = FORWARD_PROBES
        tangents = {
            n: rng.standard_normal((k,) + model.point[n].shape).astype(model.point[n].dtype, copy=False)
            for n in model.wrt
        }
        cotangents = {o: rng.standard_normal((k,) + model.outputs[o].shape) for o in self.outputs}
        numeric, reverse = {}, {}
        for o in self.outputs:
            shape = model.outputs[o].shape
            size = int(np.prod(shape, dtype=np.int64))
            v = cotangents[o].reshape(k, size)
            numeric[o], reverse[o] = {}, {}
            for n in model.wrt:
                u = tangents[n].reshape(k, -1)
                columns = self.columns[n]
                values = u @ np.asarray(columns.values[o]).reshape(u.shape[1], size)
                errors = np.abs(u) @ np.asarray(columns.errors[o]).reshape(u.shape[1], size)
                numeric[o][n] = (values.reshape((k,) + shape), errors.reshape((k,) + shape))
                block = analytic[(o, n)]
                ju = u @ block.reshape(size, u.shape[1]).T if isinstance(block, np.ndarray) else 0.0
                reverse[o][n] = np.sum(v * ju, axis=1)  # None: disconnected; a wrong shape is its pair's
        self.reverse_blocks = analytic
        try:
            self.mark_forward(pairs, *self.checked_forward(pairs, tangents, cotangents, numeric, reverse))
        finally:
            self.reverse_blocks = None  # dense blocks: not held past forward mode (the diagnosis runs after)

    @staticmethod
    def mark_forward(pairs, failures, agreed=frozenset()) -> None:
        """Pairs whose forward mode is wrong fail, and say so
        (``compare.mark_forward_failure``); a reverse-mode mismatch whose forward
        mode was taken and agrees (``agreed``) says that (``compare.mark_forward_agreement``)."""
        for pair in pairs:
            worst = failures.get((pair.input, pair.output))
            if worst is not None:
                compare.mark_forward_failure(pair, *worst)
            elif (pair.input, pair.output) in agreed:
                compare.mark_forward_agreement(pair, f"along {FORWARD_PROBES} random tangents of its own")

    def forward_failures(self, pairs, tangents, cotangents, numeric, reverse) -> dict:
        """Pairs whose forward-mode projections are wrong, each with its worst
        probe: (input, output) -> (probe, forward <v, J u>, numeric <v, J u>).

        Forward mode is probed along the joint tangent u = (u_1, ..., u_k) of all
        inputs: one JVP per probe instead of one per (input, probe), which is what
        a forward-mode pass costs to trace. ``numeric[o][n]`` holds the numeric
        J_n u_n and its error estimate (derivatives already taken: no evaluation
        is added), ``reverse[o][n]`` the projection <v, J_n u_n> by reverse
        mode; the joint values are their sums. Only an output that fails jointly
        has its inputs probed one at a time, to name the inputs whose forward
        mode is wrong. Rule (``compare.forward_wrong``): a probe fails when
        forward mode disagrees with finite differences *and* with reverse mode.
        Where both analytic modes agree they share one verdict, the reverse-mode
        pair's (a kink's subgradient, a surrogate, or a mismatch already
        reported); where they disagree, the one finite differences side with is
        right. Only pairs whose reverse-mode verdict rests on trusted finite
        differences (``FORWARD_CHECKED``) take part: where the function is
        locally constant (a surrogate) or not differentiable (a kink), forward
        mode gives the true derivative or a subgradient, and the pair's verdict
        already says why the numbers disagree.
        """
        verdicts = {(p.input, p.output): p.verdict for p in pairs}
        inputs = {o: [n for n in self.model.wrt if verdicts.get((n, o)) in FORWARD_CHECKED] for o in self.outputs}
        jvps = self.jvps_by_inputs(tangents, inputs)
        failed = {}
        for o, wrt in inputs.items():
            if not wrt:
                continue
            jvp = jvps[o]
            joint = self.forward_probe(
                {n: tangents[n] for n in wrt}, cotangents[o], jvp,
                [numeric[o][n] for n in wrt], sum(reverse[o][n] for n in wrt),
            )
            if joint is None:
                continue
            alone = {n: None for n in wrt}
            if len(wrt) > 1:
                for n in wrt:
                    jvp_n = self.batched_jvp({n: tangents[n]}, [o])[o]
                    alone[n] = self.forward_probe(
                        {n: tangents[n]}, cotangents[o], jvp_n, [numeric[o][n]], reverse[o][n]
                    )
            if not any(alone.values()):  # only jointly (or one input): every pair of o
                alone = {n: joint for n in wrt}
            failed.update({(n, o): worst for n, worst in alone.items() if worst is not None})
        return failed

    def jvps_by_inputs(self, tangents, inputs: dict) -> dict:
        """J u along the joint tangent of each output's inputs (``inputs``:
        output -> input names) from as few batches of JVPs as the graph
        allows: a forward pass gives every output's tangent at once. An output
        is served by the batch along the union of all outputs' inputs when
        every input it leaves out has no path to it in the model's trace
        (``ModelGraph.reaches``): no tangent of those can arrive, so its J u is
        the same numbers (a backbone's sequence output beside its pooled
        output, whose pooler weights reach only the latter). Other outputs
        share one batch per distinct set of inputs."""
        union = list(dict.fromkeys(n for wrt in inputs.values() for n in wrt))
        served: dict = {}
        for o, wrt in inputs.items():
            if wrt:
                whole = not any(self.may_reach(n, o) for n in union if n not in wrt)
                served.setdefault(tuple(union if whole else wrt), []).append(o)
        jvps = {}
        for wrt, outputs in served.items():
            jvps.update(self.batched_jvp({n: tangents[n] for n in wrt}, outputs))
        return jvps

    def may_reach(self, name, o) -> bool:
        """Whether input ``name`` may reach output ``o``: True unless the
        model's trace shows no path (no trace, a name it does not hold, or a
        graph analysis that fails says nothing)."""
        graph = self.graph
        if graph is None or not graph.traced or name not in graph.inputs or o not in graph.outputs:
            return True
        try:
            return graph.reaches(name, o)
        except Exception:  # noqa: BLE001 - no answer: the input is taken as reaching
            return True

    def forward_probe(self, tangents, cotangents, jvp, numeric, reverse):
        """The worst failing probe (probe, forward, numeric) of one forward-mode
        comparison (``compare.forward_wrong``), or None when every probe agrees."""
        probes = len(cotangents)
        flat = lambda a: np.asarray(a).reshape(probes, -1)  # noqa: E731
        ju_numeric = sum(flat(values) for values, _ in numeric)
        errors = sum(flat(e) for _, e in numeric)
        v = flat(cotangents)
        forward, numeric_projection = np.sum(v * flat(jvp), axis=1), np.sum(v * ju_numeric, axis=1)
        # |u|^2 over every input, input by input: never a copy of them all joined.
        u_squares = sum(compare.squared_norms(t) for t in tangents.values())
        v_squares = compare.squared_norms(v)
        dtype = np.result_type(*tangents.values())
        scale, roundoff = compare.projection_scale(
            u_squares, v_squares, compare.squared_norms(ju_numeric), compare.squared_norms(jvp), dtype)
        bad = compare.forward_wrong(
            forward,
            numeric_projection,
            np.asarray(reverse, float),
            np.sum(np.abs(v) * errors, axis=1),
            scale,
            self.tol,
            roundoff,
            np.sqrt(u_squares) * np.sqrt(v_squares),
        )
        if not bad.any():
            return None
        with np.errstate(invalid="ignore"):
            p = int(np.argmax(np.where(bad, np.nan_to_num(np.abs(forward - numeric_projection), nan=np.inf), -1.0)))
        return p, float(forward[p]), float(numeric_projection[p])

    def checked_forward(self, pairs, tangents, cotangents, numeric, reverse) -> tuple[dict, frozenset]:
        """``forward_failures``, taken every way of ``forward_ways``, and the
        pairs whose forward mode was taken and agreed; a forward pass that
        raises leaves the reverse-mode verdicts standing, with a warning on
        every pair that says why (no failure, no agreement)."""
        taken = {(p.input, p.output) for p in pairs if p.verdict in FORWARD_CHECKED}
        try:
            failures = self.each_forward_way(
                pairs, lambda: self.forward_failures(pairs, tangents, cotangents, numeric, reverse))
            wrong = {key: worst for key, worst in failures.items() if not self.forward_unavailable(pairs, *key)}
            return wrong, frozenset(taken - set(failures))
        except Exception as exc:  # forward mode raised: the reverse-mode verdicts stand
            if raised_in_gradcli(exc):
                raise
            problem = diagnose.raised(exc, self.model, True, forward=True)
            for pair in pairs:
                pair.warnings.append(f"forward mode could not be checked: {problem}")
            return {}, frozenset()

    #: Whether ``batched_jvp`` takes the JVPs inside one traced function (``jvps_traced``).
    traced_jvps = False
    #: The reverse-mode Jacobian blocks while the full check takes forward mode
    #: (``check_forward_mode``): ``eager_shown``'s reference, J t at no product.
    reverse_blocks: dict | None = None

    def forward_ways(self) -> list:
        """The ways forward mode is taken besides the model's call as it is,
        each (how a failure found only that way says so, a context that takes
        the JVPs that way). Both are the user's forward mode:

        * with the model's tf.functions run eagerly, where its trace calls
          some: TensorFlow takes a JVP through a called tf.function by its
          gradient (a custom gradient's rule transposed), and eagerly through
          its forward ops;
        * inside one traced function (``jvps_traced``), as a compiled JVP or
          HVP takes it, where the trace holds a ``tf.custom_gradient`` the
          user wrote (a library's, such as TensorFlow Probability's special
          functions', is the library's code, as for the spread rule: the
          model's JVPs are then taken one way only, ``batched_jvp``), the
          one op whose JVP depends on where the accumulator runs
          (``numerics.autodiff``'s docstring: eagerly its rule fills in a
          tangent its stop-gradiented forward ops left out, traced never), or
          where the model could not be traced (the attempt says why, as a
          warning). A warm check that took no trace holds no custom gradient
          (its program's function has none: ``warm.Entry.own_gradients``).

        None for the layer pass's quick check (no graph): a unit whose trace
        holds a custom gradient is ``check_model``'s (``analyses.layers.quick``)."""
        graph = self.graph
        if graph is None:
            return []
        ways = []
        if graph.traced and graph.calls_functions:
            ways.append((EAGER_FUNCTIONS, autodiff.functions_run_eagerly))
        if (graph.traced and graph.user_custom_gradients) or graph.error is not None:
            ways.append((TRACED_JVP, self.jvps_traced))
        return ways

    @contextlib.contextmanager
    def jvps_traced(self):
        """``batched_jvp`` takes the JVPs inside one traced function for the duration."""
        self.traced_jvps = True
        try:
            yield
        finally:
            self.traced_jvps = False

    def each_forward_way(self, pairs, take) -> dict:
        """``take()`` (failures: (input, output) -> (probe, forward, numeric[, how]))
        the model's way and each of ``forward_ways``; a failure found only
        another way says which (its ``how``). A traced JVP that cannot be taken
        (the model cannot be traced, or forward mode raises inside a trace)
        is a warning on every pair, not a failure: forward mode stands
        checked eagerly."""
        failures = take()
        for how, way in self.forward_ways():
            try:
                with way():
                    found = take()
            except Exception as exc:
                if how != TRACED_JVP or raised_in_gradcli(exc):
                    raise
                error = self.graph.error
                why = f"the model cannot be traced ({error})" if error else f"{type(exc).__name__}: {first_line(exc)}"
                for pair in pairs:
                    pair.warnings.append(
                        "forward mode not checked inside a tf.function (as a compiled JVP or HVP "
                        f"takes it): {why}; checked eagerly only")
                continue
            for key, worst in found.items():
                if key not in failures:
                    failures[key] = (*worst[:3], how)
        return failures

    def forward_unavailable(self, pairs, name, o) -> bool:
        """Whether forward mode cannot be taken from ``name`` to ``o`` at all
        (``autodiff.forward_reaches``: no tangent arrives, while reverse mode
        reached it): then its zero is no wrong derivative but a missing rule,
        and the pair gets a named warning instead of a failure."""
        if autodiff.forward_reaches(self.model.function, self.model.point, name, o):
            return False
        site = self.graph.forward_rule_missing(name, o) if self.graph is not None else None
        where = f" through {site.description}" + (f" at {site.location}" if site.location else "") if site else ""
        for pair in pairs:
            if (pair.input, pair.output) == (name, o):
                pair.warnings.append(
                    f"forward mode unavailable{where}: TensorFlow's forward mode gives no JVP there "
                    "(it transposes the op's gradient, which has no gradient of its own); "
                    "forward mode not checked for this pair"
                )
        return True

    def vjps(self, seeds: list[dict]) -> list[dict]:
        """J^T c at the point for each cotangent c of ``seeds`` (``products``)."""
        return self.products.vjps(seeds)

    def batched_jvp(self, tangents: dict, outputs) -> dict:
        """J t for a batch of tangents (``products``): inside one traced
        function while ``jvps_traced``, or for more tangents than a few eager
        JVPs cost (``autodiff.traced_in_one``) where the traced JVP is the
        eager one (``jvps_alike``); else eagerly, as the model's call takes it,
        the first tangent's alone where that shows the eager JVPs equal to a
        linear map's the check holds anyway (``eager_shown``)."""
        if self.traced_jvps:
            return self.traced_jvp(tangents, outputs)
        if autodiff.traced_in_one(tangents) and self.jvps_alike():
            try:
                return self.traced_jvp(tangents, outputs)
            except Exception:  # noqa: BLE001 - not traceable this way: the eager JVPs say
                pass
        shown = self.eager_shown(tangents, outputs)
        return shown if shown is not None else self.products.batched_jvp(tangents, outputs)

    def traced_jvp(self, tangents: dict, outputs) -> dict:
        """``products.traced_jvp``, taken once for the same tangents (the same
        arrays) and outputs, its result or its exception: the eager way's
        ``eager_shown``'s reference and the traced way (``jvps_traced``) both ask."""
        key = (tuple((n, id(t)) for n, t in tangents.items()), tuple(outputs))
        kept = getattr(self, "_traced_jvps", None)
        if kept is None or kept[0] != key:
            try:
                kept = (key, tangents, self.products.traced_jvp(tangents, outputs, self.output_specs()), None)
            except Exception as exc:  # noqa: BLE001 - raised again to each caller
                kept = (key, tangents, None, exc)
            self._traced_jvps = kept  # the tangents kept with it: their ids stay theirs
        if kept[3] is not None:
            raise kept[3]
        return kept[2]

    def eager_shown(self, tangents: dict, outputs) -> dict | None:
        """The eager JVPs of a batch (``products.batched_jvp``), taken along the
        first tangent alone where they equal there, to round-off
        (``shown_equal``), the JVPs of a linear map the check holds anyway
        (``reference_jvps``): two linear maps that differ show it along a
        random tangent with probability 1 (as the joint check's one probe
        shows a wrong JVP rule), so the reference's JVPs along the other
        tangents are the eager ones. None where no reference is held or the
        two differ: the eager JVPs are then taken along every tangent."""
        k = len(next(iter(tangents.values())))
        if k < 2 or not self.products.eager_jvps:  # a program's or a trace's JVPs: one call for all
            return None
        reference = self.reference_jvps(tangents, outputs)
        if reference is None:
            return None
        first = self.products.batched_jvp({n: t[:1] for n, t in tangents.items()}, outputs)
        if not all(shown_equal(first[o][0], reference[o][0], self.tol.rtol) for o in outputs):
            rest = self.products.batched_jvp({n: t[1:] for n, t in tangents.items()}, outputs)
            return {o: np.concatenate([first[o], rest[o]]) for o in outputs}
        return {o: np.concatenate([first[o], np.asarray(reference[o])[1:]]) for o in outputs}

    def reference_jvps(self, tangents: dict, outputs) -> dict | None:
        """J t along every tangent from a linear map the check holds without
        another product (``eager_shown``'s reference): the reverse-mode blocks
        of the full check (``check_forward_mode`` keeps them: J t is their
        product with t), else the traced JVP where forward mode is also taken
        inside a trace (``forward_ways``: a ``tf.custom_gradient`` the user
        wrote; not with tf.functions run eagerly). None where neither is held."""
        blocks = self.reverse_blocks
        reference = None if blocks is None else reverse_jvps(blocks, tangents, outputs, self.model.outputs)
        if reference is not None:
            return reference
        if autodiff.functions_eager() or not any(how == TRACED_JVP for how, _ in self.forward_ways()):
            return None
        try:
            return self.traced_jvp(tangents, outputs)
        except Exception:  # noqa: BLE001 - the traced way says why, as a warning
            return None

    def output_specs(self) -> dict | None:
        """Each output's (shape, dtype), from the model's trace (``graph``)
        where there is one: a traced JVP needs them before it runs."""
        graph = self.graph
        if graph is None or not graph.traced:
            return None
        return {o: (t.shape, t.dtype) for o, t in graph.outputs.items()}

    def jvps_alike(self) -> bool:
        """Whether a traced JVP stands for the model's eager one: its call was
        traced and its trace holds no ``tf.custom_gradient`` the user wrote
        (the one op whose JVP depends on where the accumulator runs,
        ``numerics.autodiff``'s docstring; a library's is the library's code,
        ``forward_ways``), and tf.functions run as functions."""
        graph = self.graph
        return (graph is not None and graph.traced and graph.error is None and not graph.user_custom_gradients
                and not autodiff.functions_eager())

    def reverse_jacobians(self, wrt, outputs) -> dict:
        """Reverse mode always: it is what training uses, and TensorFlow's forward
        mode usually differentiates a ``tf.custom_gradient``'s forward ops instead of
        calling its gradient function, so a forward-mode Jacobian could hide its bugs."""
        return self.products.jacobians(wrt, outputs)

    def check_cotangent(self, pair, name, o, rows) -> None:
        """The cotangent rule (``compare.cotangent_failure``) for one pair: two
        VJPs per output, with the proof's standard normal draw c (for a model of
        one output it is the proof's product, not taken again) and with -2c
        (another scale and the other sign: a gradient that uses |dy| is right
        for one sign only), each against ``rows`` (the unit-cotangent rows,
        ``[output size, input size]``, which agreed with finite differences)
        combined by the same cotangent."""
        if not hasattr(self, "cotangent_products"):
            floating = {n: self.model.outputs[n] for n in self.outputs}
            drawn = first_cotangents(floating, self.options.rng_seed)
            seeds = [{n: scale * c} for n, c in drawn.items() for scale in COTANGENT_SCALES]
            products = iter(self.vjps(seeds))
            self.cotangent_products = {
                n: [(scale * c, next(products)) for scale in COTANGENT_SCALES] for n, c in drawn.items()
            }
        shape = np.shape(self.model.point[name])
        for c, product in self.cotangent_products[o]:
            g = autodiff.checked_gradient(product[name], shape)
            if not isinstance(g, np.ndarray):  # None or a wrong shape: the pair says so itself
                return
            c = np.asarray(c, np.float64).reshape(-1)
            found = compare.cotangent_failure(
                g.reshape(-1).astype(np.float64), c @ rows, np.abs(c) @ np.abs(rows), self.tol)
            if found is not None:
                index, analytic, numeric = found
                element = f"{name}[{', '.join(str(i) for i in np.unravel_index(index, shape))}]" if shape else name
                compare.mark_cotangent_failure(pair, element, analytic, numeric)
                return

    def blocks_of(self, names, o, analytic) -> dict:
        """The analytic blocks ``[output size, input size]`` of output ``o`` for
        ``names`` (None: disconnected), from ``analytic`` or taken now (the
        fast check's re-check holds only the failing input's): the tie rule's
        ties across inputs (``diagnose.tie_direction``). An input whose
        gradient has the wrong shape has no block here (compare's shape rule
        reports it in its own pair)."""
        missing = [n for n in names if (o, n) not in analytic]
        if missing:
            analytic = {**analytic, **self.reverse_jacobians(missing, [o])}
        size = int(np.size(self.model.outputs[o]))
        return {n: None if analytic[(o, n)] is None else np.asarray(analytic[(o, n)]).reshape(size, -1)
                for n in names if not isinstance(analytic[(o, n)], autodiff.WrongShape)}

    @staticmethod
    def retry_larger_step(pair, compared_at, what: str = "projections") -> PairResult:
        """The round-off retry (``ROUNDOFF_RETRY``): an inconclusive pair
        differenced again at each of those many times the step in turn
        (``compared_at(scale)``: the pair compared again, its differences ``what``
        it compares, projections or elements, taken at ``scale`` times the step
        rule's step). It passes at one, or the inconclusive pair stands (a
        mismatch at a step the rule did not choose is not trusted)."""
        for scale in ROUNDOFF_RETRY:
            again = compared_at(scale)
            if again.verdict == PASS:
                again.warnings.append(
                    f"at the default step round-off left the {what} inconclusive ({pair.explanation}); at "
                    f"{scale:g} times the step they agree"
                )
                return again
            if again.verdict != INCONCLUSIVE:
                return pair
        return pair

    def pairs_for(self, name, outputs, analytic) -> list[PairResult]:
        numeric = self.fd.along_axes(name, settled=self.settled(name, outputs, analytic))
        larger = {}  # the round-off retry's derivatives, by step scale: one set serves every output
        if hasattr(self, "columns"):
            self.columns[name] = numeric
        x_shape = self.model.point[name].shape
        pairs = []
        for o in outputs:
            y_shape = self.model.outputs[o].shape
            # numeric.values[o]: [input size, *output shape] -> [output size, input size]
            columns = numeric.values[o].reshape(len(numeric.steps), -1).T
            errors = numeric.errors[o].reshape(len(numeric.steps), -1).T
            block = analytic[(o, name)]
            if isinstance(block, autodiff.WrongShape):  # compare's shape rule
                pairs.append(compare.wrong_shape(name, o, "full", block.expected, block.got))
                continue
            block = None if block is None else block.reshape(columns.shape)
            nonfinite = None
            if block is not None and not np.all(np.isfinite(block)):
                # Raises at a genuine singularity; else the analytic side is wrong.
                nonfinite = diagnose.nonfinite_analytic(
                    self.model, name, o, block, self.fd, self.model.outputs[o], x_shape,
                    y_shape, self.tol, self.graph,
                )
            else:
                diagnose.require_finite(
                    self.model.name, name, o, columns, y_shape, x_shape, "finite difference",
                    locate=lambda col, n=name, o=o: diagnose.nonfinite_step(self.fd, self.graph, n, o, col),
                )
            pair = compare.compare_block(name, o, block, columns, errors, y_shape, x_shape, self.tol)
            if pair.verdict == INCONCLUSIVE and block is not None and nonfinite is None:

                def compared_at(scale, pair=pair):  # called here, in this output's iteration
                    if scale not in larger:
                        larger[scale] = self.fd.along_axes(name, step_scale=scale)
                    again = larger[scale]
                    values = again.values[o].reshape(len(again.steps), -1).T
                    errors = again.errors[o].reshape(len(again.steps), -1).T
                    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(errors))):
                        return pair  # a larger step left the function's domain: no evidence there
                    return compare.compare_block(name, o, block, values, errors, y_shape, x_shape, self.tol)

                pair = self.retry_larger_step(pair, compared_at, "elements")
            if nonfinite is not None:
                pair = diagnosis.apply(pair, diagnosis.Diagnosis(MISMATCH, True, nonfinite))
            elif block is not None:
                pair = diagnose.refine(
                    pair, block, columns, errors, self.fd, self.model.outputs[o], x_shape,
                    y_shape, self.tol, self.options.allow_surrogate, graph=self.graph,
                    suspects=diagnose.kink_suspects(numeric.one_sided, o, columns.shape, self.tol),
                    others=lambda names, o=o: self.blocks_of(names, o, analytic),
                )
            if block is not None and not pair.failed and pair.verdict in FORWARD_CHECKED:
                self.check_cotangent(pair, name, o, block)
            if self.options.keep_blocks and pair.failed:
                pair.window = block_window(block, columns, errors, self.tol)
                pair.window.output_shape, pair.window.input_shape = tuple(y_shape), tuple(x_shape)
            pairs.append(pair)
        return pairs


    def settled(self, name, outputs, analytic):
        """The rule that lets an element skip the second finite-difference level:
        |a - D(h)| <= atol + rtol |a| + FD_SAFETY * round-off, for every output.
        Such an element passes ``compare``'s two-level rule whatever D(2h) is
        (proof in ``finite_diff``'s docstring); NaN never settles."""
        size = self.model.point[name].size

        def rule(values, roundoff):
            done = np.ones(size, bool)
            for o in outputs:
                d1 = values[o].reshape(size, -1).T  # [output size, input size]
                block = analytic[(o, name)]
                if isinstance(block, autodiff.WrongShape):
                    continue  # no element to compare (compare's shape rule)
                a = np.zeros_like(d1) if block is None else block.reshape(d1.shape)
                allowed = compare.allowed_error(a, a, roundoff[o].reshape(size, -1).T, self.tol)
                with np.errstate(invalid="ignore"):
                    done &= np.all(np.abs(a - d1) <= allowed, axis=0)
            return done

        return rule

def block_window(analytic, numeric, errors, tol, size: int = WINDOW) -> BlockWindow:
    """Up to ``size`` x ``size`` elements of a block ([output size, input size])
    around its worst element, with the elements outside tolerance marked by the
    rule of ``compare.compare_block``. A disconnected block (None) is zeros."""
    a = np.zeros_like(numeric) if analytic is None else analytic
    allowed = compare.allowed_error(a, numeric, errors, tol)
    failing = np.abs(a - numeric) > allowed
    worst = np.unravel_index(int(np.argmax(np.abs(a - numeric) / allowed)), a.shape)
    start = [int(min(max(w - size // 2, 0), max(n - size, 0))) for w, n in zip(worst, a.shape)]
    cut = (slice(start[0], start[0] + size), slice(start[1], start[1] + size))
    return BlockWindow(
        row_offset=start[0], col_offset=start[1], rows=a.shape[0], columns=a.shape[1],
        analytic=a[cut].copy(), numeric=numeric[cut].copy(), failing=failing[cut].copy(),
    )


def reverse_jvps(blocks: dict, tangents: dict, outputs, values: dict) -> dict | None:
    """J t along each tangent (``tangents``: input -> ``[k, *shape]``) of each
    output from reverse mode's Jacobian blocks ((output, input) -> an array of
    output size by input size elements; None: disconnected, no term), each
    output's shape from ``values``. None where a block is not held or has
    the wrong size (compare's shape rule reports it in its pair)."""
    k = len(next(iter(tangents.values())))
    products = {}
    for o in outputs:
        shape = np.shape(values[o])
        size = int(np.prod(shape, dtype=np.int64))
        total = np.zeros((k, size))
        for n, t in tangents.items():
            block = blocks.get((o, n), ())
            if block is None:
                continue
            if not isinstance(block, np.ndarray) or block.size != size * np.size(t[0]):
                return None
            total = total + np.reshape(t, (k, -1)) @ block.reshape(size, -1).T
        products[o] = total.reshape((k,) + shape)
    return products


def shown_equal(eager, traced, rtol: float) -> bool:
    """Whether two JVPs along one tangent are equal to round-off: finite, no
    element apart by more than ``JVP_SHOWN_EQUAL_ULPS`` units of their dtype's
    eps times their largest element, and that bound at least
    ``JVP_SHOWN_MARGIN`` times below the check's ``rtol`` (else False: every
    eager JVP is taken)."""
    eager, traced = np.asarray(eager), np.asarray(traced)
    if eager.shape != traced.shape or not (np.all(np.isfinite(eager)) and np.all(np.isfinite(traced))):
        return False
    bound = JVP_SHOWN_EQUAL_ULPS * max(machine_eps(eager.dtype), machine_eps(traced.dtype))  # bfloat16 included
    if bound * JVP_SHOWN_MARGIN > rtol:
        return False
    wide = np.result_type(eager.dtype, traced.dtype, np.float64)  # complex stays complex
    eager, traced = eager.astype(wide), traced.astype(wide)
    scale = max(np.max(np.abs(eager), initial=0.0), np.max(np.abs(traced), initial=0.0))
    return bool(np.max(np.abs(eager - traced), initial=0.0) <= bound * scale)
