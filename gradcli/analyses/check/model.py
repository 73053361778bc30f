"""``check_spec`` and ``check_model``: one model file loaded under its own
``check`` settings and checked, the mode chosen, the whole-model check run
(beside the layer pass when there is one) and its pairs explained.

Rules applied here: a model whose float64 rebuild computes another function is
checked in its own dtype (``_users_own_rebuild``); a model's error of any
kind is its own error row, never the batch's (``check_spec``); the spread rule
checks every user-written gradient on a passing pair's path
(``_check_user_gradients``); the joint check runs on a thread beside the
layer pass only for a pure model function (``beside``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from concurrent.futures import Future

import numpy as np

from gradcli import config, progress
from gradcli.analyses.check.fast import FastCheck
from gradcli.analyses.check.full import FullCheck, model_stage
from gradcli.analyses.check.joint import JointCheck, joint_input
from gradcli.analyses.check.mode import choose_mode, eager_call_seconds, require_full_memory, require_joint_memory
from gradcli.analyses.check import warm
from gradcli.analyses.check.precision import compute_precision, reaches
from gradcli.analyses.check.products import ProgramProducts
from gradcli.analyses.check.raised import in_autodiff, raised_in_gradcli
from gradcli.analyses.check.rules import JOINT_LIMIT, JOINT_STAGE
from gradcli.analyses.layers import plan as layer_plan
from gradcli.analyses.layers import run as layer_run
from gradcli.analyses.reach import require_gradient
from gradcli.errors import (
    EXIT_MODEL, GradcliError, ModelError, death_message, debugging, internal_error_message,
)
from gradcli.analyses.load import load
from gradcli.model.loading import Model, differentiable
from gradcli.model.structure import split_complex_outputs
from gradcli.numerics.finite_diff import FiniteDifferences
from gradcli.options import CheckOptions
from gradcli.results import PASS, ModelResult
from gradcli.verdicts import compare, diagnose, excuses, same_function
from gradcli.verdicts.culprit import ModelGraph


def check_spec(spec, options: CheckOptions, fixed=()) -> ModelResult:
    """Check one model file (or module object), applying its own ``check`` dict
    under the options in ``fixed`` (see ``gradcli.config``)."""
    started = time.perf_counter()
    try:
        with progress.stage("loading", _display(spec)):
            model = _load(spec, options)
            own, applied = config.model_options(options, model.settings, fixed, model.name)
            if (own.rng_seed, own.native_dtype) != (options.rng_seed, options.native_dtype):
                model = _load(spec, own)  # these settings take effect while loading
            model, proof = _users_own_rebuild(spec, model, own)
        result = _check_loaded(spec, model, own, proof)
        if own.samples or own.special:
            from gradcli.analyses.sweep import sweep

            result.sweep = sweep(spec, model, own, lambda at, options: _check_loaded(spec, at, options), _load)
        if applied:
            settings = ", ".join(f"{k.replace('_', '-')}={v!r}" for k, v in applied.items())
            result.notes.append(f"options from the model file's `check`: {settings}")
    except GradcliError as exc:
        name = _display(spec)
        # The message keeps its parameters as {@name}: the command line spells
        # them as flags, the API as keywords (``errors.spell_texts``).
        result = ModelResult(name=name, path=name, error=exc.template, error_code=exc.exit_code)
    except SystemExit as exc:  # sys.exit() while run: the run goes on, the model is an error
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
    if model.kind != "keras" or not model.runs_in_float64 or options.native_dtype:
        return model, None
    proof = same_function.prove(model, options.rng_seed)
    if proof is None or not proof.differs:
        return model, proof
    native = _load(spec, dataclasses.replace(options, native_dtype=True))
    native.notes.append(
        f"the float64 rebuild of the Keras model computes another function ({proof.detail}): "
        "checking the model itself, in its own dtype"
    )
    return native, None


def _load(spec, options: CheckOptions) -> Model:
    return load(spec, options)


def _check_loaded(spec, model: Model, options: CheckOptions, proof=None) -> ModelResult:
    """``check_model`` of a model loaded from ``spec``; loaded again and checked
    cold, as a first check of it, when a kept program no longer stands for
    it (``warm.Reload``)."""
    try:
        return check_model(model, options, proof)
    except warm.Reload:
        return check_model(_load(spec, options), options)


def _display(spec) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "__name__", repr(spec))


def check_model(model: Model, options: CheckOptions, proof=None) -> ModelResult:
    """Check one loaded model. ``proof``: its ``same_function.prove`` result when
    the caller took it already (``check_spec`` does for a Keras rebuild).
    A function checked before in this process is checked with the program its
    earlier check kept (``warm``); one that fails to prove itself raises
    ``warm.Reload`` (``_check_loaded`` loads the model again)."""
    started = time.perf_counter()
    split_complex_outputs(model)
    outputs = [o for o, v in model.outputs.items() if differentiable(v)]
    graph = ModelGraph(model)
    entry = warm.warm_start(model, outputs) if outputs else None
    program = entry.program if entry is not None else None
    if program is not None and entry.precision is not None:
        if model.first_trace is not None or entry.own_gradients:  # as after the precision rule:
            graph.trace()  # the graph rules (the spread rule) read the trace
        dtype, precision_note = entry.precision
    else:
        with model_stage(model, "tracing"):  # the precision rule traces the model first
            dtype, precision_note = compute_precision(model, graph)
        if program is not None:  # the rule's answer for the graph the program was traced from
            entry.precision = (dtype, precision_note)
    products = ProgramProducts(model, entry) if program is not None else None
    tol = compare.tolerance(dtype, options.rtol, options.atol)
    size = sum(int(np.size(model.point[n])) for n in model.wrt)
    if not outputs:
        raise GradcliError(f"{model.name}: no floating-point output with elements to differentiate")
    reached = _require_a_gradient(model, outputs, graph, products, options.rng_seed)

    def differences(mode):
        return FiniteDifferences(
            model.function, model.point, outputs, wrt=list(model.wrt),
            joint=mode == "fast" or size <= JOINT_LIMIT, jit_compile=options.xla,
            nonsmooth=mode == "fast" and excuses.has_nonsmooth_op(graph),
            precision=dtype,
            center=model.outputs,  # one-sided slopes for the kink scan (diagnose.kink_suspects)
            # points run one by one through a trace: the precision rule's, or the kept program's
            traced=graph.callable() if program is None else program,
        )

    fd = differences("full" if options.mode == "auto" else options.mode)
    mode, predicted, why = options.mode, None, None
    if mode == "auto":
        mode, predicted, why = choose_mode(fd, model.wrt, options.budget, eager_call_seconds(model))
        if mode == "fast":
            spent, fd = fd.evaluations, differences("fast")
            fd.evaluations = spent
    result = ModelResult(
        name=model.name, path=model.path, dtype=dtype, mode=mode, tolerance=tol,
        notes=list(model.notes) + ([precision_note] if precision_note else []) + ([why] if why else [])
        + ([graph.run_note] if graph.run_note else []),
        predicted_full_seconds=predicted,
    )
    result.call_proof = _prove_own_function(model, options, result.notes, proof, products, reached)
    if not warm.proves(entry, result.call_proof):  # the kept program is not this function now
        warm.stale(entry)
    if options.autodiff == "reverse":
        result.notes.append("forward mode (JVPs) not checked: autodiff is 'reverse'")
    skipped = [o for o in model.outputs if o not in outputs]
    if skipped:
        result.notes.append(f"outputs {', '.join(skipped)} are not floating-point or have no elements: not checked")
    if mode == "full":
        require_full_memory(model, outputs, size, options.order, options.max_memory)
    _run_checks(model, options, mode, fd, graph, outputs, tol, result, products)
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


def _require_a_gradient(model: Model, outputs, graph: ModelGraph, products=None, seed: int = 0) -> tuple | None:
    """``reach.require_gradient``, except where a TensorFlow path exists but
    its gradient is None (an op with no gradient for that input, a
    stop_gradient): check goes on, so the disconnected pairs name the op
    that cuts them. No path at all (numpy arithmetic) stays the model error
    it is in every command, except in a layer unit (``Model.unit``), whose
    pairs the disconnected rule judges: zero where the finite differences
    are, a failure where the output changes. ``products``: the check's own
    (a kept program's); ``seed``: the check's, whose draw the proof takes.
    Returns the pass's (cotangents, VJP) where it took the proof's draw
    through ``products`` (``require_gradient``), else None."""
    through = None if products is None else (lambda seeds: products.taken_vjps([seeds])[0])
    try:
        reached = require_gradient(model, outputs, through=through, seed=seed)
    except ModelError:
        if not model.unit and not any(reaches(graph, n, o) for n in model.wrt for o in outputs):
            raise
        return None
    return reached if through is not None else None


def _run_checks(model: Model, options: CheckOptions, mode: str, fd, graph, outputs, tol, result,
                products=None) -> None:
    """The whole-model check of ``mode`` and, where it runs, the layer pass
    (``analyses.layers``) into ``result``: the joint check (``JointCheck``)
    runs beside the pass when that is safe (``_beside_safely``)."""
    checker = FullCheck if mode == "full" else FastCheck
    layered = layer_plan.wants_layers(model, options, mode)
    # The pass's refusals (no such layer, its memory) come before any work.
    plan = layer_plan.plan_layers(model, options) if layered else None
    waiting = None  # the units the joint check waits for (``BesideThePass``); None: it runs after the pass
    if layered and mode == "fast" and len(model.wrt) > 1 and fd.joint_group(model.wrt):
        # Where in the model is the layer pass's to say: one joint projection
        # settles the whole model at a cost that does not grow with its inputs.
        checker = JointCheck
        joint_memory = require_joint_memory(model, sum(int(np.size(model.point[n])) for n in model.wrt), options)
        result.notes.append(
            f"whole model checked along joint directions ({len(model.wrt)} inputs moved at once); "
            "the layer table says where"
        )
        if _beside_safely(model, graph):
            waiting = _units_too_large_beside(joint_memory, plan, options, result.notes)
    check = checker(model, outputs, fd, tol, options, graph, products)
    layers_failed = check.layer_verdict = Future()  # the layer pass's verdict, which the joint row reads
    start = BesideThePass(check.run, waiting)
    try:
        if layered:  # where in the model: analyses.layers (a failing layer explains a failing joint row)
            result.layers, layer_notes = check_layers(model, options, plan, unit_done=start.unit_done)
            result.notes += layer_notes
            _internal_layer_errors(result)
    except BaseException as exc:
        layers_failed.set_result(False)
        if start.joint is not None and isinstance(exc, Exception):  # an interrupt does not wait for it
            concurrent.futures.wait([start.joint])  # never leave it running past this model
        raise
    joint = start.joint
    layers_failed.set_result(any(r.failed for r in result.layers))
    if joint is not None and not joint.done():  # the layer pass ended first: say what is left
        progress.report(JOINT_STAGE, 0, None, joint_input(len(model.wrt)))
        while not concurrent.futures.wait([joint], timeout=1.0).done:
            progress.report(JOINT_STAGE, 1, None, joint_input(len(model.wrt)))  # still running
        progress.report(JOINT_STAGE, 1, 1, joint_input(len(model.wrt)))
    try:
        result.pairs = check.run() if joint is None else joint.result()
        result.notes += check.notes
        with model_stage(model, "custom gradients over a spread"):
            _check_user_gradients(result, graph, tol)
        with model_stage(model, "diagnosis"):
            diagnose.explain(model, result.pairs, fd, graph, tol, options)
    except GradcliError:
        raise
    except Exception as exc:  # a gradient function (or the model near the point) raised
        if raised_in_gradcli(exc):
            raise  # a bug of ours: check_spec reports it as an internal error
        raise diagnose.raised(exc, model, in_autodiff(exc), graph) from None


def _beside_safely(model: Model, graph) -> bool:
    """Whether the joint check may run beside the layer pass (``beside``): the
    model's function is pure (``Model.pure_call``), and its trace shows it
    calls no ``tf.function`` (``ModelGraph.calls_functions``; a model that
    cannot be traced says nothing, and runs after). Forward mode through a
    called function is also taken with the functions run eagerly, and the
    trace inlines them, by a switch that is process-wide
    (``jvp_functions.functions_run_eagerly``): beside it, the other check's own
    functions would run their bodies op by op, and its trace would inline
    the calls it looks for. The keras-hub backbones and the ResNet-50 call
    none, and keep running beside."""
    return bool(model.pure_call and graph.trace() and not graph.calls_functions)


def _units_too_large_beside(joint_memory: int, plan, options: CheckOptions, notes: list) -> set | None:
    """The layer units the joint check must not run beside (``BesideThePass``):
    those whose predicted peak (``LayerPlan.memory``) and the joint check's
    (``require_joint_memory``) fit the memory limit only one at a time, as
    each was made to fit alone. None when the last unit is one of them: the
    joint check then runs after the pass. A note says which and why. GPT-2
    small's shapes (its token embedding table is 38.6M of its 124M weights):
    side by side, 14.4-14.9 GB peak (bench/README.md)."""
    from gradcli.memory import over_limit

    keys = list(plan.unit_memory)  # in the pass's order
    too_large = {k for k in keys if over_limit(joint_memory + plan.memory(k), options.max_memory)}
    if not too_large:
        return too_large
    largest = max(too_large, key=plan.memory)
    over = over_limit(joint_memory + plan.memory(largest), options.max_memory)
    if keys[-1] in too_large:
        notes.append(f"the whole-model joint check ran after the layer pass, not beside it: beside layer "
                     f"{largest[0]} they would need {over}")
        return None
    notes.append(f"the whole-model joint check started once layer {largest[0]} was checked"
                 + (f" (and {len(too_large) - 1} more)" if len(too_large) > 1 else "")
                 + f", not beside it: beside it they would need {over}")
    return too_large


class BesideThePass:
    """Starts the joint check (``work``) beside the layer pass (``beside``)
    once none of the units in ``waiting`` is left to check: at once when it
    is empty, never when it is None (the caller runs the check after the
    pass). ``unit_done`` is the pass's callback; ``joint`` the running
    check's Future, or None while it has not started."""

    def __init__(self, work, waiting: set | None):
        self.work, self.waiting, self.joint = work, waiting, None
        if waiting is not None and not waiting:
            self.joint = beside(work)

    def unit_done(self, key) -> None:
        if self.waiting and key in self.waiting:
            self.waiting.discard(key)
            if not self.waiting:
                self.joint = beside(self.work)


def _internal_layer_errors(result: ModelResult) -> None:
    """A layer call whose check raised what gradcli did not expect (``internal``)
    is the model's error (exit 3), with that row's message: an internal error
    is never silent beside a passing check. The pairs and rows checked stay in
    the result."""
    broken = [r for r in result.layers if r.internal]
    if broken:
        more = f" (and {len(broken) - 1} more layer calls)" if len(broken) > 1 else ""
        result.error = f"{result.name}: layer {broken[0].label} could not be checked: {broken[0].error}{more}"
        result.error_code = EXIT_MODEL


def check_layers(model: Model, options: CheckOptions, plan=None, unit_done=None):
    """The layer pass (``analyses.layers.run.check_layers``), its units checked
    by this module's ``check_model``."""
    return layer_run.check_layers(model, options, plan, check_model, unit_done)


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
        found = graph.spread_culprit(pair.input, pair.output, tol, ops) if ops else None
        if found is not None:
            compare.mark_spread_failure(pair, *found)
    if checked:
        from gradcli.verdicts.culprit import SPREAD_POINTS

        result.notes.append(
            f"user-written gradients checked alone over a spread of inputs ({', '.join(sorted(checked))}): "
            + "; ".join(label for label, _ in SPREAD_POINTS)
        )


def beside(work) -> Future:
    """``work()`` on a thread of its own, beside the caller (``check_model``:
    the joint check beside the layer pass); its result or exception in the
    Future. Daemon: an interrupted command does not wait for it.

    Why it pays: the layer pass spends much of its time tracing (Python, one
    core) and the joint check evaluating the whole network (TensorFlow's
    kernels, which release the interpreter lock): on 2 cores a ResNet-50's
    joint check (15 s) hides inside its layer pass (29 s). Only where
    ``_beside_safely`` says so: nothing either check runs reads state the
    other writes, except TensorFlow's own forward-mode helpers, whose caches
    are not thread-safe: they are met under ``jvp_functions.CACHE_LOCK``
    (``numerics.autodiff``). While it runs, the two checks share the cores
    (``in_place.sharing_cores``)."""
    import threading

    from gradcli.numerics.in_place import sharing_cores

    future: Future = Future()

    def run():
        if not future.set_running_or_notify_cancel():
            return
        try:
            with sharing_cores():
                future.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            future.set_exception(exc)

    threading.Thread(target=run, name="gradcli-joint-check", daemon=True).start()
    return future


def _prove_own_function(model: Model, options: CheckOptions, notes: list, proof=None, products=None,
                        taken=None):
    """``verdicts.same_function.prove`` (or the ``proof`` taken already): a model
    whose checked function differs from the user's own call fails whatever its
    pairs say; one whose own call could not be run says so in a note.
    ``products``: where the check takes its products (a kept program,
    ``ProgramProducts``), so the proof is of them; ``taken``: (cotangents,
    VJP) the check took through them already (``_require_a_gradient``)."""
    if proof is None:
        through = None if products is None else (lambda cotangents: products.taken_vjps([cotangents])[0])
        proof = same_function.prove(model, options.rng_seed, taken=taken, through=through)
    if proof is not None and not proof.proven and not proof.differs:
        notes.append(f"not proven to be the user's function: {proof.detail}")
    return proof
