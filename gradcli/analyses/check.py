"""``gradcli check``: compare analytic derivatives with finite differences.

Each (input, output) pair is checked on its own, so errors that cancel when
outputs are summed (what ``tf.gradients`` does by default) still show.

Modes:

* ``full``: the whole Jacobian block, element by element: numeric columns from
  ``FiniteDifferences.along_axes``, analytic blocks from ``autodiff.jacobians``.
* ``fast``: ``probes`` random projections v^T J u per pair: reverse mode
  <u, J^T v> against finite differences along u, and forward mode <v, J u>
  along the joint tangent of all inputs (``_FastCheck.forward_failures``). Its
  cost does not grow with the number of elements. A pair failing in reverse
  mode is then checked in full so the report can name elements. TensorFlow's
  forward mode usually differentiates the forward ops of a
  ``tf.custom_gradient`` rather than calling its gradient function, so the modes
  can disagree when a gradient function is not the derivative of its ops; each
  is weighed against the numbers.
* ``auto``: ``full`` when its predicted time fits ``CheckOptions.budget``
  seconds, else ``fast``. The prediction times one chunk of first-pass
  differences per input group (``FiniteDifferences.predict_axes_seconds``) and
  assumes every element settles in the first pass (a wrong element costs two
  more evaluations); inputs small enough that the whole first pass is one chunk
  per group run full without timing. The report says which mode ran and why.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from concurrent.futures import Future

import numpy as np

from gradcli import config, progress
from gradcli.numerics import autodiff
from gradcli.verdicts import compare, diagnose, excuses, same_function
from gradcli.verdicts.culprit import ModelGraph
from gradcli.errors import EXIT_MODEL, GradcliError, ModelError, UsageError, debugging, internal_error_message
from gradcli.options import CheckOptions
from gradcli.numerics.finite_diff import FiniteDifferences, coarser
from gradcli.model.core import first_cotangents
from gradcli.model.structure import split_complex_outputs
from gradcli.model.loading import Model, differentiable, host_array, load_model, run_model
from gradcli.analyses.reach import require_gradient
from gradcli.analyses import by_layer
from gradcli.results import EXPLANATIONS, INCONCLUSIVE, MISMATCH, PASS, ZERO, BlockWindow, CheckResult, ModelResult, PairResult

#: ``keep_blocks``: a failing pair keeps at most this many rows and columns of
#: its blocks, around its worst element: enough to see a pattern in a heat map,
#: small enough for the JSON document.
WINDOW = 64
#: Up to this many differentiated elements (and always in fast mode) one traced
#: batch function perturbs every input at once: tracing costs more than the
#: larger batched copies. Beyond it each input is differenced on its own.
JOINT_LIMIT = 2048
#: auto's lower bound (``choose_mode``): a traced evaluation inside the
#: differences' loop is at most this many times faster than one eager call of
#: the model (eager overhead is about a millisecond per call; the smallest
#: models evaluate in tens of microseconds traced)...
TRACE_SPEEDUP = 50.0
#: ... and a bound this many times over the budget needs no timing.
CLEARLY_OVER = 10.0
#: Random (tangent, cotangent) pairs that check forward mode in a full check: a
#: forward-mode bug lives in a JVP rule, which acts on every direction, so a
#: few probes see it; FD and reverse mode are already at hand, so each probe
#: costs one JVP and no evaluation.
FORWARD_PROBES = 3
#: Forward-mode probes of the joint whole-model check (``_JointCheck``): each is
#: a forward pass through the whole network (3 s on a ResNet-50), and the layer
#: pass probes every layer's forward mode 3 times; what is left to the whole
#: model is the ops between layers, and one random direction sees a wrong JVP
#: rule with probability 1 (down to the tolerance, as its power says).
JOINT_FORWARD_PROBES = 1
#: Fast mode's round-off retry (``_FastCheck.retry_larger_step``): an
#: inconclusive projection (error estimate over a tenth of the derivatives) is
#: differenced again at this many times the step. Where round-off dominates
#: (an output far larger than its change along the probe: a weight whose
#: gradient is tiny, the expand kernel of an EfficientNet's squeeze-excite
#: block, derivatives of 1e-8 against |f| = 0.5), the retry cuts it 16-fold and
#: the Richardson estimate still bounds the truncation it adds.
ROUNDOFF_RETRY = 16.0
#: A failing fast pair whose element-wise re-check would not fit the budget is
#: re-checked on a random sample of its elements, at least this many
#: (``_FastCheck.sample_within_budget``).
MIN_SAMPLED = 256
#: A sample that shows no element outside tolerance leaves the failing
#: projections unexplained (a max pool's few hundred kinks at ties among 41k
#: inputs, which a sample of a tenth can miss): then every element is
#: re-checked when that is predicted within this many budgets. The sample's cut
#: is a prediction from timings, which a loaded machine doubles; a verdict
#: must not hang on it where the whole re-check costs a few budgets at most.
UNEXPLAINED_BUDGETS = 4.0
#: The progress stage shown while the joint check (run beside the layer pass)
#: still runs after the pass has ended.
JOINT_STAGE = "whole model along joint directions"
#: Reverse-mode verdicts whose pairs also check forward mode (``forward_failures``).
FORWARD_CHECKED = (PASS, MISMATCH, ZERO)

#: The cotangent rule's seeds, as multiples of the proof's standard normal draw
#: c (``_FullCheck.check_cotangent``): c itself (its product is the proof's),
#: and -2c, another scale of the other sign.
COTANGENT_SCALES = (1.0, -2.0)


def check_paths(
    specs: list,
    options: CheckOptions,
    *,
    fixed=(),
    fail_fast: bool = False,
    jobs: int = 1,
    progress=None,
) -> CheckResult:
    """Load and check every model; a model that fails to load becomes an error row.

    ``fixed`` names the option fields given explicitly (command line, API
    keywords): a model file's ``check`` dict does not override them.
    ``fail_fast`` stops at the first model that is not ok; the rest are listed
    in ``CheckResult.skipped``. ``jobs > 1`` checks models in that many worker
    processes (``gradcli.analyses.batch``: a model that ends its worker becomes
    an error row); results keep the order of ``specs``.
    ``progress(done, total, label)``, if given, is called before the first
    model and after each one (``label``: the model finished, or ``None``).
    """
    from gradcli.analyses.batch import check_batch

    return check_batch(specs, options, fixed=fixed, fail_fast=fail_fast, jobs=jobs, progress=progress)


def check_spec(spec, options: CheckOptions, fixed=()) -> ModelResult:
    """Check one model file (or module object), applying its own ``check`` dict
    under the options in ``fixed`` (see ``gradcli.config``)."""
    started = time.perf_counter()
    try:
        model = _load(spec, options)
        own, applied = config.model_options(options, model.settings, fixed, model.name)
        if (own.rng_seed, own.float64) != (options.rng_seed, options.float64):
            model = _load(spec, own)  # these settings take effect while loading
        model, proof = _users_own_rebuild(spec, model, own)
        result = check_model(model, own, proof)
        if own.samples or own.special:
            from gradcli.analyses.sweep import sweep

            result.sweep = sweep(spec, model, own, check_model, _load)
        if applied:
            settings = ", ".join(f"{k.replace('_', '-')}={v!r}" for k, v in applied.items())
            result.notes.append(f"options from the model file's `check`: {settings}")
    except GradcliError as exc:
        name = _display(spec)
        result = ModelResult(name=name, path=name, error=str(exc), error_code=exc.exit_code)
        if isinstance(exc, UsageError) and exc.names_parameters:
            result.usage = (exc.problem, exc.param, exc.bad_value)
    except SystemExit as exc:  # sys.exit() while run: the run goes on, the model is an error
        from gradcli.analyses.batch import death_message

        name = _display(spec)
        result = ModelResult(name=name, path=name, error=f"{name}: {death_message(exc.code)}",
                             error_code=EXIT_MODEL)
    except (Exception, GeneratorExit) as exc:  # one model's surprise never loses the batch
        if debugging():
            raise
        name = _display(spec)
        result = ModelResult(name=name, path=name, error=f"{name}: {internal_error_message(exc)}",
                             error_code=EXIT_MODEL)
    result.seconds = time.perf_counter() - started
    return result


def _users_own_rebuild(spec, model: Model, options: CheckOptions):
    """A Keras model checked through its float64 rebuild must compute the
    user's function (``same_function.prove`` against the original model); a
    rebuild that does not (a layer whose config misses state set outside its
    constructor) is dropped for the model's own dtype, with a note, rather than
    failing a correct model as "not the user's function". Returns the model to
    check and the proof already taken for it (None: not taken yet)."""
    if model.kind != "keras" or not model.runs_in_float64 or not options.float64:
        return model, None
    proof = same_function.prove(model, options.rng_seed)
    if proof is None or not proof.differs:
        return model, proof
    native = _load(spec, dataclasses.replace(options, float64=False))
    native.notes.append(
        f"the float64 rebuild of the Keras model computes another function ({proof.detail}): "
        "checking the model itself, in its own dtype"
    )
    return native, None


def _load(spec, options: CheckOptions) -> Model:
    return load_model(
        spec,
        wrt=options.wrt,
        overrides=options.overrides,
        rng_seed=options.rng_seed,
        float64=options.float64,
        data=options.data,
        imports=options.imports,
        loss=options.loss,
    )


def _display(spec) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "__name__", repr(spec))


def check_model(model: Model, options: CheckOptions, proof=None) -> ModelResult:
    """Check one loaded model. ``proof``: its ``same_function.prove`` result when
    the caller took it already (``check_spec`` does for a Keras rebuild)."""
    started = time.perf_counter()
    split_complex_outputs(model)
    outputs = [o for o, v in model.outputs.items() if differentiable(v)]
    graph = ModelGraph(model)
    dtype, precision_note = _compute_precision(model, graph)
    tol = compare.tolerance(dtype, options.rtol, options.atol)
    size = sum(int(np.size(model.point[n])) for n in model.wrt)
    if not outputs:
        raise GradcliError(f"{model.name}: no floating-point output with elements to differentiate")
    try:
        require_gradient(model, outputs)
    except ModelError:
        # A TensorFlow path exists but its gradient is None (an op with no
        # gradient for that input, a stop_gradient): check goes on, so the
        # disconnected pairs name the op that cuts them. No path at all
        # (numpy arithmetic) stays the model error it is in every command.
        if not any(_reaches(graph, n, o) for n in model.wrt for o in outputs):
            raise

    def differences(mode):
        return FiniteDifferences(
            model.function, model.point, outputs, wrt=list(model.wrt),
            joint=mode == "fast" or size <= JOINT_LIMIT, jit_compile=options.jit_compile,
            nonsmooth=mode == "fast" and excuses.has_nonsmooth_op(graph),
            precision=dtype,
            center=model.outputs,  # one-sided slopes for the kink scan (diagnose.kink_suspects)
            traced=graph.callable(),  # the precision rule's trace, for points run one by one
        )

    fd = differences("full" if options.mode == "auto" else options.mode)
    mode, predicted, why = options.mode, None, None
    if mode == "auto":
        mode, predicted, why = choose_mode(fd, model.wrt, options.budget, _forward_seconds(model))
        if mode == "fast":
            spent, fd = fd.evaluations, differences("fast")
            fd.evaluations = spent
    result = ModelResult(
        name=model.name, path=model.path, dtype=dtype, mode=mode, tolerance=tol,
        notes=list(model.notes) + ([precision_note] if precision_note else []) + ([why] if why else [])
        + ([graph.run_note] if graph.run_note else []),
        predicted_full_seconds=predicted,
    )
    result.call_proof = _prove_own_function(model, options, result.notes, proof)
    if options.autodiff == "reverse":
        result.notes.append("forward mode (JVPs) not checked: autodiff is 'reverse'")
    skipped = [o for o in model.outputs if o not in outputs]
    if skipped:
        result.notes.append(f"outputs {', '.join(skipped)} are not floating-point or have no elements: not checked")
    if mode == "full":
        _require_full_memory(model, outputs, size, options.order, options.max_memory)
    checker = _FullCheck if mode == "full" else _FastCheck
    layered = by_layer.wants_layers(model, options, mode)
    # The pass's refusals (no such layer, its memory) come before any work.
    plan = by_layer.plan_layers(model, options) if layered else None
    if layered and mode == "fast" and len(model.wrt) > 1 and fd.joint_group(model.wrt):
        # Where in the model is the layer pass's to say: one joint projection
        # settles the whole model at a cost that does not grow with its inputs.
        checker = _JointCheck
        _require_joint_memory(model, size, options)
        result.notes.append(
            f"whole model checked along joint directions ({len(model.wrt)} inputs moved at once); "
            "the layer table says where"
        )
    check = checker(model, outputs, fd, tol, options, graph)
    layers_failed = check.layer_verdict = Future()  # the layer pass's verdict, which the joint row reads
    joint = _beside(check.run) if checker is _JointCheck and model.pure_call else None
    try:
        if layered:  # where in the model: analyses.by_layer (a failing layer explains a failing joint row)
            result.layers, layer_notes = by_layer.check_layers(model, options, plan)
            result.notes += layer_notes
    except BaseException as exc:
        layers_failed.set_result(False)
        if joint is not None and isinstance(exc, Exception):  # an interrupt does not wait for it
            concurrent.futures.wait([joint])  # never leave it running past this model
        raise
    layers_failed.set_result(any(r.failed for r in result.layers))
    if joint is not None and not joint.done():  # the layer pass ended first: say what is left
        progress.report(JOINT_STAGE, 0, None, joint_input(len(model.wrt)))
        while not concurrent.futures.wait([joint], timeout=1.0).done:
            progress.report(JOINT_STAGE, 1, None, joint_input(len(model.wrt)))  # still running
        progress.report(JOINT_STAGE, 1, 1, joint_input(len(model.wrt)))
    try:
        result.pairs = check.run() if joint is None else joint.result()
        _check_user_gradients(result, graph, tol)
        diagnose.explain(model, result.pairs, fd, graph, tol, options)
    except GradcliError:
        raise
    except Exception as exc:  # a gradient function (or the model near the point) raised
        if _raised_in_gradcli(exc):
            raise  # a bug of ours: check_spec reports it as an internal error
        raise diagnose.raised(exc, model, _in_autodiff(exc), graph) from None
    if fd.eager:
        result.notes.append(
            "the model could not be traced by tf.function/vectorized_map: finite "
            "differences ran one point at a time"
        )
    result.evaluations = fd.evaluations
    if options.order == 2:
        from gradcli.analyses.second_order import check_second_order

        pairs, evaluations, notes = check_second_order(model, outputs, tol, mode, options)
        result.pairs += pairs
        result.evaluations += evaluations
        result.notes += notes
    compare.apply_fail_on(result.pairs, options.fail_on)
    result.seconds = time.perf_counter() - started
    return result


def _check_user_gradients(result, graph, tol) -> None:
    """The spread rule: every gradient the user wrote on the path of a passing
    pair is checked alone over a spread of inputs (``ModelGraph.spread_culprit``);
    a wrong one fails the pair (``compare.mark_spread_failure``), and a note
    says which gradients were checked at which points."""
    checked = set()
    for pair in result.pairs:
        if pair.failed or pair.verdict != PASS or not graph.traced:
            continue
        if pair.input not in graph.inputs:
            # A joint pair (the layer pass's whole-model row) names no one
            # input; the layer pass checks each layer's own gradients. Taken
            # input by input, the spread check of an EfficientNet's 214 inputs
            # re-checked the same swish gradients (tf.nn.silu's) for over 20 minutes.
            continue
        ops = graph.user_gradient_ops(pair.input, pair.output)
        checked |= {graph.describe_op(op) for op in ops}
        found = graph.spread_culprit(pair.input, pair.output, tol) if ops else None
        if found is not None:
            compare.mark_spread_failure(pair, *found)
    if checked:
        from gradcli.verdicts.culprit import SPREAD_POINTS

        result.notes.append(
            f"user-written gradients checked alone over a spread of inputs ({', '.join(sorted(checked))}): "
            + "; ".join(label for label, _ in SPREAD_POINTS)
        )


def _settled(value) -> Future:
    """A Future that already holds ``value``."""
    future: Future = Future()
    future.set_result(value)
    return future


def _beside(work) -> Future:
    """``work()`` on a thread of its own, beside the caller (``check_model``:
    the joint check beside the layer pass); its result or exception in the
    Future. Daemon: an interrupted command does not wait for it.

    Why it pays: the layer pass spends much of its time tracing (Python, one
    core) and the joint check evaluating the whole network (TensorFlow's
    kernels, which release the interpreter lock): on 2 cores a ResNet-50's
    joint check (15 s) hides inside its layer pass (29 s). Only for a model
    whose function is a pure function of its arguments (``Model.pure_call``):
    nothing either check runs reads state the other writes, except
    TensorFlow's own forward-mode helpers, whose caches are not thread-safe:
    every forward-mode product holds ``autodiff.FORWARD_MODE``."""
    import threading

    future: Future = Future()

    def run():
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            future.set_exception(exc)

    threading.Thread(target=run, name="gradcli-joint-check", daemon=True).start()
    return future


def _forward_seconds(model: Model) -> float:
    """Seconds of one eager call of the checked function at the point (the
    second of two: the first may build the model's state); timed at load
    (``loading._forward``) when the model was loaded at this point."""
    import tensorflow as tf

    if model.forward_seconds is not None:
        return model.forward_seconds

    point = {n: tf.convert_to_tensor(v) for n, v in model.point.items()}
    model.function(point)
    started = time.perf_counter()
    model.function(point)
    return time.perf_counter() - started


def _prove_own_function(model: Model, options: CheckOptions, notes: list, proof=None):
    """``verdicts.same_function.prove`` (or the ``proof`` taken already): a model
    whose checked function differs from the user's own call fails whatever its
    pairs say; one whose own call could not be run says so in a note."""
    if proof is None:
        proof = same_function.prove(model, options.rng_seed)
    if proof is not None and not proof.proven and not proof.differs:
        notes.append(f"not proven to be the user's function: {proof.detail}")
    return proof


def _compute_precision(model: Model, graph: ModelGraph) -> tuple[str, str]:
    """The dtype whose steps and tolerances the check uses, and a note when it is
    not the point's: the lowest floating precision among the tensors that carry
    the differentiated values (``ModelGraph.precision``: the forward path from
    the differentiated inputs to the outputs, and the reverse pass's cotangents),
    never constants, shapes, counters or seeds beside them. Rule: a difference
    quotient cannot resolve more than the coarsest rounding inside the function,
    so a model fed float64 that computes in float32 is checked with float32
    rules. A lower precision weakens the check only when an op (or input) that
    lowers it can be named: the note gives its type, name and model-file line;
    with none to name, the point's dtype stays."""
    point_dtype = str(model.dtype)
    try:
        lowest, sites = graph.precision()
    except Exception:  # graph analysis is a bonus: keep the point's dtype
        return point_dtype, ""
    if lowest is None or lowest == point_dtype or coarser(point_dtype, lowest) == point_dtype:
        return point_dtype, ""
    if not sites:  # nothing to name: never weaken on an unnamed cause
        return point_dtype, ""
    where = ", ".join(_precision_site(s) for s in sites[:3])
    more = f" and {len(sites) - 3} more" if len(sites) > 3 else ""
    return lowest, (
        f"the model computes in {lowest} inside although its inputs are {point_dtype} "
        f"({where}{more}): steps and tolerances for {lowest}"
    )


def _precision_site(site) -> str:
    """``Cast at model.py:12 (op cast_1)``: what lowers the precision, where."""
    what = site.description.split(" -> ")[0]
    if site.op_type == "Placeholder":
        return what
    where = f" at {site.location}" if site.location else ""
    return f"{what}{where} (op {site.op_name})"


def _reaches(graph: ModelGraph, name: str, output: str) -> bool:
    try:
        return graph.reaches(name, output)
    except Exception:  # graph analysis is a bonus: no path known
        return False


def _raised_in_gradcli(exc: BaseException) -> bool:
    """The deepest frame is gradcli's own code and TensorFlow did not raise it
    (an op error is the model's, wherever TensorFlow surfaced it)."""
    import traceback

    import gradcli
    from gradcli.tf_import import import_tensorflow

    if isinstance(exc, import_tensorflow().errors.OpError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    package = os.path.dirname(os.path.abspath(gradcli.__file__)) + os.sep
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(package)


def _in_autodiff(exc: BaseException) -> bool:
    """Raised while TensorFlow computed a derivative (a tape, an accumulator)."""
    import traceback

    return any(
        os.path.basename(f.filename) in ("autodiff.py", "backprop.py", "forwardprop.py")
        for f in traceback.extract_tb(exc.__traceback__)
    )


def _require_full_memory(model: Model, outputs, size: int, order: int, max_memory) -> None:
    """A full check holds every analytic (output, input) block at once, and a
    numeric block per input; at order 2 also SECOND_ORDER_BLOCKS dense
    size x size blocks (``second_order._full``, calibrated in ``gradcli.memory``).
    Stop first if they would not fit (``gradcli.memory``)."""
    from gradcli.memory import SECOND_ORDER_BLOCKS, dense_bytes, require_memory

    rows = sum(int(np.size(model.outputs[o])) for o in outputs)
    itemsize = np.dtype(model.dtype).itemsize
    dtype = np.dtype(model.dtype)
    what = f"a full check's Jacobian blocks ({rows} x {size} {dtype})"
    second = SECOND_ORDER_BLOCKS * size * size if order == 2 else 0
    if order == 2:
        what += f" and second-derivative blocks ({SECOND_ORDER_BLOCKS} x {size} x {size})"
    require_memory(
        dense_bytes(rows * size + second, itemsize),
        what,
        "The fast mode ({@mode} fast) checks random projections and builds no Jacobian", max_memory,
    )


def _require_joint_memory(model: Model, size: int, options: CheckOptions) -> None:
    """``_JointCheck`` holds its probes' directions over every element, the
    batch of them its second level differences, and one point per evaluation
    in the traced loop: 2 probes' worth plus 2 points, each counted
    ``memory.COPIES`` times (``dense_bytes``)."""
    from gradcli.memory import dense_bytes, require_memory

    itemsize = max(np.asarray(model.point[n]).dtype.itemsize for n in model.wrt)
    require_memory(
        dense_bytes((2 * options.probes + 2) * size, itemsize),
        f"the whole-model check along joint directions ({options.probes} probes x {size} elements)",
        "Use fewer {@probes}, or check the whole model input by input ({@by_layer} off)",
        options.max_memory,
    )


def choose_mode(fd: FiniteDifferences, wrt, budget: float, forward_seconds: float | None = None
                ) -> tuple[str, float | None, str]:
    """auto's choice: (mode, predicted seconds of a full check (a lower bound
    when the bound decided) or None, why).

    Rule: one timed batch of differences per input group predicts the full
    check. Timing costs a trace of the model in a loop and a batch of
    evaluations per group, which is minutes for a network of millions of
    weights; so first a lower bound: a full check evaluates the model at least
    twice per element, each evaluation no faster than ``forward_seconds`` (one
    eager call of the model) divided by ``TRACE_SPEEDUP``. A lower bound over
    ``CLEARLY_OVER`` times the budget chooses fast without timing."""
    if fd.one_batch_per_group(wrt):
        return "full", None, "auto ran the full check: its first pass is one batch per input group"
    size = sum(int(np.size(fd.point[n])) for n in wrt)
    if forward_seconds is not None:
        bound = 2 * size * forward_seconds / TRACE_SPEEDUP
        if bound > CLEARLY_OVER * budget:
            return "fast", bound, (
                f"auto ran the fast check: a full check would take over {bound:.2g} s ({size} "
                f"elements, each at least 2 evaluations of {1e3 * forward_seconds / TRACE_SPEEDUP:.2g} ms), "
                f"over the {budget:g} s budget"
            )
    predicted = fd.predict_axes_seconds(list(wrt))
    if predicted <= budget:
        return "full", predicted, (
            f"auto ran the full check: predicted {predicted:.2g} s (one timed batch of "
            f"differences per input group), within the {budget:g} s budget"
        )
    return "fast", predicted, (
        f"auto ran the fast check: a full check would take about {predicted:.2g} s "
        f"(predicted from one timed batch per input group), over the {budget:g} s budget"
    )


class _FullCheck:
    """Every element of every (input, output) Jacobian block."""

    #: Whether the layer pass failed a layer, a Future (``_JointCheck`` reads
    #: it; it waits for the pass when the check runs beside it, ``check_model``)
    layer_verdict: Future = _settled(False)

    def __init__(self, model, outputs, fd, tol, options, graph=None):
        self.model, self.outputs, self.fd, self.tol, self.options = model, outputs, fd, tol, options
        self.graph = graph

    def run(self) -> list[PairResult]:
        analytic = self.reverse_jacobians(self.model.wrt, self.outputs)
        self.columns = {}  # input -> its numeric Jacobian columns (``pairs_for``)
        pairs = [
            pair
            for name in self.model.wrt
            for pair in self.pairs_for(name, self.outputs, analytic)
        ]
        if self.options.autodiff == "both":
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
        self.mark_forward(pairs, self.checked_forward(pairs, tangents, cotangents, numeric, reverse))

    @staticmethod
    def mark_forward(pairs, failures) -> None:
        """Pairs whose forward mode is wrong fail, and say so (``compare.mark_forward_failure``)."""
        for pair in pairs:
            worst = failures.get((pair.input, pair.output))
            if worst is not None:
                compare.mark_forward_failure(pair, *worst)

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
        failed = {}
        for o in self.outputs:
            wrt = [n for n in self.model.wrt if verdicts.get((n, o)) in FORWARD_CHECKED]
            if not wrt:
                continue
            jvp = self.batched_jvp({n: tangents[n] for n in wrt}, [o])[o]
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

    def forward_probe(self, tangents, cotangents, jvp, numeric, reverse):
        """The worst failing probe (probe, forward, numeric) of one forward-mode
        comparison (``compare.forward_wrong``), or None when every probe agrees."""
        probes = len(cotangents)
        flat = lambda a: np.asarray(a).reshape(probes, -1)  # noqa: E731
        ju_numeric = sum(flat(values) for values, _ in numeric)
        errors = sum(flat(e) for _, e in numeric)
        v = flat(cotangents)
        forward, numeric_projection = np.sum(v * flat(jvp), axis=1), np.sum(v * ju_numeric, axis=1)
        u = np.concatenate([flat(t) for t in tangents.values()], axis=1)
        scale, roundoff = compare.projection_scale(u, v, ju_numeric, flat(jvp), u.dtype)
        bad = compare.forward_wrong(
            forward,
            numeric_projection,
            np.asarray(reverse, float),
            np.sum(np.abs(v) * errors, axis=1),
            scale,
            self.tol,
            roundoff,
            np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1),
        )
        if not bad.any():
            return None
        with np.errstate(invalid="ignore"):
            p = int(np.argmax(np.where(bad, np.nan_to_num(np.abs(forward - numeric_projection), nan=np.inf), -1.0)))
        return p, float(forward[p]), float(numeric_projection[p])

    def checked_forward(self, pairs, tangents, cotangents, numeric, reverse) -> dict:
        """``forward_failures``; a forward pass that raises leaves the reverse-mode
        verdicts standing, with a warning on every pair that says why."""
        try:
            failures = self.forward_failures(pairs, tangents, cotangents, numeric, reverse)
            if self.graph is not None and self.graph.traced and self.graph.calls_functions:
                # TensorFlow takes a JVP through a traced tf.function by its own
                # rules (a custom gradient's rule transposed) and eagerly through
                # the forward ops: both are the user's forward mode, both checked.
                with autodiff.functions_run_eagerly():
                    eager = self.forward_failures(pairs, tangents, cotangents, numeric, reverse)
                for key, worst in eager.items():
                    if key not in failures:
                        failures[key] = (*worst[:3], "with the model's tf.functions run eagerly")
            return {key: worst for key, worst in failures.items() if not self.forward_unavailable(pairs, *key)}
        except Exception as exc:  # forward mode raised: the reverse-mode verdicts stand
            if _raised_in_gradcli(exc):
                raise
            problem = diagnose.raised(exc, self.model, True, forward=True)
            for pair in pairs:
                pair.warnings.append(f"forward mode could not be checked: {problem}")
            return {}

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

    def reverse_jacobians(self, wrt, outputs) -> dict:
        """Reverse mode always: it is what training uses, and TensorFlow's forward
        mode usually differentiates a ``tf.custom_gradient``'s forward ops instead of
        calling its gradient function, so a forward-mode Jacobian could hide its bugs."""
        return autodiff.jacobians(
            self.model.function, self.model.point, wrt, outputs, mode="reverse"
        ).blocks

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

    def pairs_for(self, name, outputs, analytic) -> list[PairResult]:
        numeric = self.fd.along_axes(name, settled=self.settled(name, outputs, analytic))
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
            if nonfinite is not None:
                pair.verdict, pair.failed, pair.explanation = MISMATCH, True, nonfinite
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


class _FastCheck(_FullCheck):
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
        pairs, numeric = [], {}
        for name in model.wrt:
            numeric[name] = self.fd.along(name, tangents[name])
            failed_outputs = []
            for o in self.outputs:
                pair = self.project(name, o, tangents[name], cotangents[o], reverse[o], numeric[name])
                if pair.verdict == INCONCLUSIVE:
                    pair = self.retry_larger_step(pair, name, o, tangents[name], cotangents[o], reverse[o])
                if pair.failed and pair.reverse_failed:
                    failed_outputs.append(o)
                pairs.append(pair)
            if failed_outputs:
                pairs = self.replace_with_full(pairs, name, failed_outputs)
        if self.options.autodiff == "both":
            self.check_forward_probes(pairs, tangents, cotangents, numeric, reverse, self.outputs)
        return pairs

    def retry_larger_step(self, pair, name, o, tangents, cotangents, reverse) -> PairResult:
        """The round-off retry (``ROUNDOFF_RETRY``): an inconclusive projection
        differenced again at that many times the step. It passes there, or the
        inconclusive pair stands (a mismatch at a step the rule did not choose
        is not trusted)."""
        again = self.project(name, o, tangents, cotangents, reverse,
                             self.fd.along(name, tangents, step_scale=ROUNDOFF_RETRY))
        if again.verdict != PASS:
            return pair
        again.warnings.append(
            f"at the default step round-off left the projections inconclusive ({pair.explanation}); at "
            f"{ROUNDOFF_RETRY:g} times the step they agree"
        )
        return again

    def check_forward_probes(self, pairs, tangents, cotangents, numeric, reverse, outputs) -> None:
        """Forward mode along the fast check's own probes: the numeric J u of each
        input (``numeric[n]``, already taken) and <u, J^T v> from its reverse-mode
        products (``reverse[o][p][n]``; a wrong shape or None counts 0, its pair
        says so), then ``forward_failures``' rule."""
        wrt = list(tangents)
        along = {o: {n: (numeric[n].values[o], numeric[n].errors[o]) for n in wrt} for o in outputs}
        reverse_projection = {
            o: {
                n: np.array([
                    float(np.sum(tangents[n][p] * r[n]))
                    if isinstance(r[n], np.ndarray) and r[n].shape == tangents[n][p].shape else 0.0
                    for p, r in enumerate(reverse[o])
                ])
                for n in wrt
            }
            for o in outputs
        }
        self.mark_forward(pairs, self.checked_forward(pairs, tangents, cotangents, along, reverse_projection))

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
        return self.compare_projection(
            name, o, u, v, None if disconnected else flat(grads), flat(numeric.values[o]), flat(numeric.errors[o]),
        )

    def compare_projection(self, label, o, u, v, jtv, ju_numeric, errors) -> PairResult:
        """Reverse mode's <u, J^T v> (``jtv`` ``[probes, inputs]``, None when
        disconnected) against finite differences' v^T J u (``ju_numeric`` and its
        ``errors``, ``[probes, outputs]``), by ``compare_projections``' rule."""
        scale, roundoff = compare.projection_scale(
            u, v, ju_numeric, np.zeros_like(u) if jtv is None else jtv, u.dtype
        )
        return compare.compare_projections(
            label, o,
            None if jtv is None else np.sum(u * jtv, axis=1),
            None,
            np.sum(v * ju_numeric, axis=1),
            np.sum(np.abs(v) * errors, axis=1),
            scale,
            self.tol,
            roundoff,
            np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1),
            # The RMS element of the [outputs x inputs] block: ||J||_F / sqrt(m n).
            element_size=float(scale[0]) / np.sqrt(u.shape[1] * v.shape[1]),
        )

    def replace_with_full(self, pairs, name, outputs) -> list[PairResult]:
        """Re-check failing pairs element by element, so the report names elements.

        The re-check builds dense blocks (the analytic ones, and the numeric
        block of every output by ``name``), so it asks the memory rule first
        (``gradcli.memory.over_limit``, the prediction of a full check): when
        they would not fit, the fast result stands with a note saying why."""
        from gradcli.memory import dense_bytes, over_limit

        rows = sum(int(np.size(self.model.outputs[o])) for o in self.outputs)
        elements = int(np.size(self.model.point[name]))
        over = over_limit(dense_bytes(rows * elements, np.dtype(self.model.dtype).itemsize),
                          self.options.max_memory)
        if over is not None:
            for p in pairs:
                if p.input == name and p.output in outputs:
                    p.warnings.append(
                        f"fast check failed; the element-wise re-check ({rows} x {elements} "
                        f"blocks) would need {over}: the fast result is shown"
                    )
            return pairs
        sample, predicted = self.sample_within_budget(name, elements)
        shown = "fast check failed; element-wise comparison shown"
        if sample is not None:
            checked, count = self.sampled_pairs(name, outputs, sample)
            if not any(p.failed for p in checked) and predicted <= UNEXPLAINED_BUDGETS * self.options.budget:
                shown += (
                    f" (a sample of {count} elements showed none outside tolerance; all {elements}, "
                    f"predicted {predicted:.2g} s, within {UNEXPLAINED_BUDGETS:g} budgets)"
                )
                sample = None
        if sample is None:
            analytic = self.reverse_jacobians([name], outputs)
            full = {p.output: p for p in self.pairs_for(name, outputs, analytic)}
        else:
            full = {p.output: p for p in checked}
            shown = (
                f"fast check failed; element-wise comparison of {count} of its {elements} elements, drawn "
                f"at random (all of them would take about {predicted:.2g} s, over the "
                f"{self.options.budget:g} s budget): the counts are the sample's"
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

    def sample_within_budget(self, name, elements) -> tuple:
        """(flat element indices, predicted seconds of all) for an element-wise
        re-check that would not fit the budget, or (None, None). Rule: a
        failing pair is re-checked on every element when the first pass along
        every axis is predicted (``FiniteDifferences.predict_axes_seconds``) to
        fit ``budget``; else on a random sample of ``elements * budget /
        predicted`` of them (at least ``MIN_SAMPLED``), so that a wrong kernel
        of a real-size layer (590k elements: about 40 minutes in full) is shown
        by elements within the budget. The projections found the error; the
        sample shows where it is, as far as it reaches."""
        predicted = self.fd.predict_axes_seconds([name])
        if predicted is None or predicted <= self.options.budget:
            return None, None
        count = min(elements, max(MIN_SAMPLED, int(elements * self.options.budget / predicted)))
        rng = np.random.default_rng([self.options.rng_seed, 4])
        return rng.choice(elements, count, replace=False), predicted

    def sampled_pairs(self, name, outputs, drawn) -> tuple[list[PairResult], int]:
        """``pairs_for`` on the elements ``drawn`` (in the order drawn) of input
        ``name`` alone: the model as a function of those elements (the others
        fixed at the point, ``_sampled_model``), checked by the same rules
        (steps, ladders, kinks, culprit), its element indices mapped back to
        the input's, and the sample's size. A direction of that function
        costs more than one of the whole input (a scatter of the sample, and
        no XLA for fewer directions): its own first pass is timed, and the
        sample cut to the budget's share when it would not fit."""
        shape = np.shape(self.model.point[name])

        def checker(sample):
            sub = _sampled_model(self.model, name, sample)
            fd = self.fd.anew(function=sub.function, point=sub.point, wrt=[name],
                              jit_compile=self.fd.jit_compile or False)
            return _FullCheck(sub, outputs, fd, self.tol, self.options, self.graph)

        sample = np.sort(drawn)
        check = checker(sample)
        predicted = check.fd.predict_axes_seconds([name])
        if predicted is not None and predicted > self.options.budget and len(sample) > MIN_SAMPLED:
            self.fd.evaluations += check.fd.evaluations
            keep = max(MIN_SAMPLED, int(len(sample) * self.options.budget / predicted))
            sample = np.sort(drawn[:keep])
            check = checker(sample)
        pairs = check.pairs_for(name, outputs, check.reverse_jacobians([name], outputs))
        self.fd.evaluations += check.fd.evaluations
        for pair in pairs:
            for element in [*pair.failing, *pair.kinks, *([pair.worst] if pair.worst else [])]:
                if element.input_index:
                    flat = int(sample[int(element.input_index[0])])
                    element.input_index = [int(i) for i in np.unravel_index(flat, shape)]
        return pairs, len(sample)


class _JointCheck(_FastCheck):
    """The whole-model fast check along joint directions, for a model checked
    layer by layer (``analyses.by_layer``): each probe's tangent moves every
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

    nearby = False  # this check runs at the nearby point (``judge_nearby``)

    def run(self) -> list[PairResult]:
        model, probes = self.model, self.options.probes
        rng = np.random.default_rng(self.options.rng_seed)  # the draws of _FastCheck.run
        cotangents = {o: rng.standard_normal((probes,) + model.outputs[o].shape) for o in self.outputs}
        reverse = {o: self.vjps([{o: v[p]} for p in range(probes)]) for o, v in cotangents.items()}
        tangents = {
            n: rng.standard_normal((probes,) + model.point[n].shape).astype(model.point[n].dtype, copy=False)
            for n in model.wrt
        }
        numeric = self.fd.along_joint(tangents)
        label = joint_input(len(model.wrt))
        flat = lambda a: np.asarray(a).reshape(probes, -1)  # noqa: E731
        u = np.concatenate([flat(tangents[n]) for n in model.wrt], axis=1)
        shapes = {n: np.shape(model.point[n]) for n in model.wrt}
        pairs = []
        for o in self.outputs:
            grads = {n: [autodiff.checked_gradient(r[n], shapes[n]) for r in reverse[o]] for n in model.wrt}
            wrong = next(((n, g) for n in model.wrt for g in grads[n] if isinstance(g, autodiff.WrongShape)), None)
            if wrong is not None:  # compare's shape rule, naming the input
                pairs.append(compare.wrong_shape(wrong[0], o, "fast", wrong[1].expected, wrong[1].got))
                continue
            jtv = np.concatenate([  # a disconnected input contributes 0 to the joint projection
                np.zeros_like(flat(tangents[n])) if any(g is None for g in grads[n]) else flat(grads[n])
                for n in model.wrt
            ], axis=1)
            v = flat(cotangents[o])
            pair = self.compare_projection(label, o, u, v, jtv, flat(numeric.values[o]), flat(numeric.errors[o]))
            analytic = np.sum(u * jtv, axis=1)
            forward = self.options.autodiff == "both"
            worst, taken = None, False
            if pair.failed and pair.reverse_failed and self.fd.nonsmooth:
                if forward and not self.layer_verdict.done():
                    # The layer pass still runs beside: the forward-mode product
                    # is taken while it ends, not after (a failing layer keeps
                    # the row as it is, and forward mode is then checked).
                    worst, taken = self.checked_joint_forward(pair, tangents, cotangents[o], o, numeric, analytic), True
                if self.layer_verdict.result():
                    pair.warnings.append(
                        "not examined for kinks along the probes: a failing layer in the layer table "
                        "explains a failing joint row"
                    )
                else:
                    self.settle_on_kinks(pair, tangents, v, o, analytic)
            if pair.verdict in FORWARD_CHECKED and forward:
                if not taken:
                    worst = self.checked_joint_forward(pair, tangents, cotangents[o], o, numeric, analytic)
                if worst is not None:
                    compare.mark_forward_failure(pair, *worst)
            pairs.append(pair)
        return pairs

    def settle_on_kinks(self, pair, tangents, v, o, analytic) -> None:
        """A failing joint probe through non-smooth ops (``fd.nonsmooth``): the
        one-sided slopes along it by the ladder rule
        (``diagnose.directional_slopes``). Every failing probe's slopes settle,
        agree with each other and with the analytic value: a pass (kinks
        crossed inside the step). Every one's slopes differ beyond their
        errors, the analytic value between them: ``kink``, not a failure (the
        point is not differentiable along the probes: a relu input exactly at
        0, a dead channel's zero moved by its bias), and the layer table
        judges the layers. Slopes that do not settle: ``inconclusive``, still a
        failure. Those, and slopes with a gap that do not bound the analytic
        value, go to the nearby-point rule (``judge_nearby``); a clean
        mismatch (settled slopes, no gap) stands."""
        from gradcli.results import KINK

        probes = sorted({int(e.input_index[0]) for e in pair.failing})
        if not probes:
            return
        _, _, h = self.fd.joint_steps(tangents)
        left, right, left_err, right_err = diagnose.directional_slopes(
            self.fd, {n: t[probes] for n, t in tangents.items()}, h[probes], self.model.outputs[o], o,
        )
        w = v[probes]  # [probes, out]: the cotangents project the slopes
        L, R = np.sum(w * left.T, axis=1), np.sum(w * right.T, axis=1)
        eL, eR = np.sum(np.abs(w) * left_err.T, axis=1), np.sum(np.abs(w) * right_err.T, axis=1)
        a = analytic[probes]
        gap, settled, between, agrees = diagnose.slope_tests(a, L, R, eL, eR, self.tol)
        slopes = "; ".join(f"probe {p}: left {l:.6g}, right {r:.6g}, analytic {x:.6g}" for p, l, r, x in zip(probes, L, R, a))
        if np.all(~gap & settled & agrees):
            pair.verdict, pair.failed, pair.reverse_failed = PASS, False, False
            pair.failing, pair.n_failing = [], 0
            pair.explanation = EXPLANATIONS[PASS]
            pair.warnings.append(
                f"kinks inside the step along {len(probes)} joint probes: at smaller steps both one-sided "
                f"slopes agree with the analytic value ({slopes})"
            )
        elif np.all(gap & between):
            pair.verdict, pair.failed, pair.reverse_failed = KINK, False, False
            pair.explanation = (
                f"{EXPLANATIONS[KINK]} along {len(probes)} joint probes, and the analytic value lies between "
                f"them ({slopes}): the point is not differentiable along them, not a failure; the layer "
                "table judges each layer"
            )
            pair.warnings.append(
                "the whole model is not differentiable at the point along the joint probes (one-sided "
                "slopes differ, non-smooth ops on the path): its projection cannot judge the gradient there"
            )
        else:
            if not np.all(settled):
                pair.verdict = INCONCLUSIVE
                pair.explanation = (
                    f"{EXPLANATIONS[INCONCLUSIVE]} (along {int(np.sum(~settled))} of the failing joint probes the "
                    f"one-sided slopes do not settle as the step shrinks: the network crosses kinks at every "
                    f"scale of the step along them; {slopes}): the layer table judges each layer"
                )
            if not self.nearby and (np.any(~settled) or np.any(gap)):  # kinks' evidence, not a clean mismatch
                self.judge_nearby(pair, o, slopes)

    def judge_nearby(self, pair, o, slopes) -> None:
        """The nearby-point rule for a joint row the one-sided slopes cannot
        settle: slopes that do not settle, or an analytic value outside them
        (``settle_on_kinks``), are what kinks of many elements at once give: a
        network whose activations sit exactly on its kinks (a zero-padded
        window's pre-activation is its bias, exactly 0 at initialization) moves
        them all along a joint probe, and a valid subgradient of several kinks
        need not lie between the slopes of their sum. The joint check runs
        again at a nearby point, every input moved off the kinks
        (``by_layer.moved_off``, as the tie rule moves a layer's inputs), where
        the network is differentiable along the probes: it passes there, and
        the row is ``kink``, not a failure, with a warning (the evidence: slopes
        that do not settle or do not bound the analytic value at the point, a
        non-smooth op on the path, a right gradient nearby); it fails there,
        and the row stands, with a warning giving that check's verdict."""
        from gradcli.results import KINK

        nearby = self.at_nearby_point(o)
        where = f"at a nearby point (every input moved: {by_layer.MOVED})"
        if nearby.failed:
            pair.warnings.append(f"{where} the whole model's joint check fails too ({nearby.verdict}: "
                                 f"{nearby.explanation})")
            return
        pair.verdict, pair.failed, pair.reverse_failed = KINK, False, False
        pair.explanation = (
            f"{EXPLANATIONS[KINK]} along the failing joint probes ({slopes}): at the point their one-sided "
            "slopes do not settle or do not bound the analytic value, as kinks of many elements at once "
            f"give; {where} the whole model passes its joint check ({nearby.verdict}): not a failure; "
            "the layer table judges each layer"
        )
        pair.warnings.append(
            "the whole model is not differentiable at the point along the joint probes (kinks of many "
            f"elements at once); {where} it passes"
        )

    def at_nearby_point(self, o):
        """The joint pair of output ``o`` at the point moved off its kinks
        (``judge_nearby``): the same function, the same draws and step rule."""
        model = self.model
        rng = np.random.default_rng([self.options.rng_seed, 3])
        point = {n: by_layer.moved_off(v, rng) if n in model.wrt else v for n, v in model.point.items()}
        nearby = dataclasses.replace(model, point=point, taken_vjp=None, notes=[])
        nearby.outputs = {k: host_array(v) for k, v in run_model(nearby, point).items()}
        fd = self.fd.anew(point=point, center=nearby.outputs)
        check = _JointCheck(nearby, [o], fd, self.tol, self.options, self.graph)
        check.nearby = True
        (pair,) = check.run()
        self.fd.evaluations += fd.evaluations
        return pair

    def checked_joint_forward(self, pair, tangents, cotangents, o, numeric, reverse):
        """Forward mode along the first ``JOINT_FORWARD_PROBES`` joint tangents
        (``forward_probe``'s rule); a forward pass that raises leaves the pair
        standing, with a warning."""
        k = JOINT_FORWARD_PROBES
        tangents = {n: t[:k] for n, t in tangents.items()}
        try:
            jvp = self.batched_jvp(tangents, [o])[o]
            return self.forward_probe(
                tangents, cotangents[:k], jvp, [(numeric.values[o][:k], numeric.errors[o][:k])], reverse[:k]
            )
        except Exception as exc:  # forward mode raised: the reverse-mode verdict stands
            if _raised_in_gradcli(exc):
                raise
            pair.warnings.append(
                f"forward mode could not be checked: {diagnose.raised(exc, self.model, True, forward=True)}"
            )
            return None


def _sampled_model(model: Model, name: str, sample) -> Model:
    """``model`` as a function of the elements ``sample`` (flat indices) of
    input ``name``, the rest of it fixed at the point: one input of that name,
    a vector; the other inputs as they are (``_FastCheck.sampled_pairs``)."""
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


def joint_input(count: int) -> str:
    """The input named by a joint pair (``_JointCheck``)."""
    return f"all {count} inputs jointly"


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
