"""The speed work must not change verdicts: the two-pass full check against the
four-point one, its settling rule against the two-level verdict rule, and how
auto picks its mode. No timing is asserted here (timings live in bench/)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import fixture, gradcli, sample
from gradcli.analyses import check as checking
from gradcli.analyses.check import CheckOptions, check_model
from gradcli.model.loading import load_model
from gradcli.numerics.finite_diff import ROUNDOFF_ULPS, FiniteDifferences
from gradcli.results import PASS
from gradcli.verdicts import compare


# -- the settling rule implies the two-level verdict ------------------------------

def test_a_settled_element_passes_the_two_level_rule_whatever_the_second_level():
    """Whatever D(2h) is, an element settled after D(h) passes compare's rule on
    the Richardson value R = (4 D(h) - D(2h)) / 3 with its error estimate.
    100,000 seeded random cases, D(h) placed at and near the edge of the rule."""
    rng = np.random.default_rng(0)
    n = 100_000
    for rtol, atol in ((1e-6, 1e-9), (1e-3, 1e-5), (1e-6, 0.0)):
        tol = compare.Tolerance(rtol=rtol, atol=atol, rule="test")
        a = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 4, n)
        roundoff = 10.0 ** rng.uniform(-16, -4, n)
        edge = compare.allowed_error(a, a, roundoff, tol)
        d1 = a + rng.uniform(-1, 1, n) * edge  # settled by construction
        assert np.all(np.abs(a - d1) <= compare.allowed_error(a, a, roundoff, tol))
        d2 = d1 + rng.standard_normal(n) * 10.0 ** rng.uniform(-12, 2, n) * np.abs(a)
        richardson = (4 * d1 - d2) / 3
        # The two-level estimate: Richardson term plus a round-off bound >= 1.5 x pass 1's.
        estimate = np.abs(d1 - d2) / 3 + 1.5 * roundoff
        block = compare.compare_block(
            "x", "y", a[None], richardson[None], estimate[None], (), (n,), tol
        )
        assert block.n_failing == 0, block.failing[:3]


# -- in-place evaluation: the same points as batched copies, nothing left changed --


def _two_input_model():
    """y = [sum(sin(A) * B), tanh(B_0) tanh(B_1)]: two outputs, a joint group of
    two inputs of different shapes (the split path) and one of a single input."""
    import tensorflow as tf

    def model(v):
        return {
            "y": tf.stack([tf.reduce_sum(tf.sin(v["A"]) * v["B"]), tf.reduce_prod(tf.tanh(tf.reshape(v["B"], [-1])[:2]))]),
            "z": tf.reduce_sum(v["A"] ** 3),
        }

    rng = np.random.default_rng(3)
    return model, {"A": rng.standard_normal((3, 4)), "B": rng.standard_normal(12).reshape(3, 4), "c": np.ones(2)}


@pytest.mark.parametrize("joint", [True, False])
def test_in_place_differences_equal_batched_copies_bit_for_bit(joint):
    """The in-place loop evaluates exactly the points x +- h e_i the batched
    copies do (same rounding of x_i + h), so D(h), D+(h), D-(h) agree bit for
    bit; against the closed forms they agree to Richardson's accuracy; and the
    point is left unchanged (the variable is restored after each direction)."""
    import tensorflow as tf

    model, point = _two_input_model()
    original = {n: v.copy() for n, v in point.items()}
    center = {o: np.asarray(t) for o, t in model({n: tf.constant(v) for n, v in point.items()}).items()}
    results = {}
    for in_place in (True, False):
        fd = FiniteDifferences(model, point, ["y", "z"], wrt=["A", "B"], joint=joint, center=center)
        if not in_place:
            fd.eager = True  # the batched-copy path, run point by point
        results[in_place] = {n: fd.along_axes(n) for n in ("A", "B")}
    for n in ("A", "B"):
        fast, copied = results[True][n], results[False][n]
        for o in ("y", "z"):
            np.testing.assert_array_equal(fast.values[o], copied.values[o])
            for side in ("left", "right"):
                np.testing.assert_array_equal(fast.one_sided[side][o], copied.one_sided[side][o])
    A, B = point["A"].ravel(), point["B"].ravel()
    tanh = np.tanh(B)
    exact_A = {"y": np.stack([np.cos(A) * B, np.zeros(12)], axis=1), "z": 3 * A**2}
    dprod = np.zeros((12, 1))
    dprod[0], dprod[1] = (1 - tanh[0] ** 2) * tanh[1], tanh[0] * (1 - tanh[1] ** 2)
    exact_B = {"y": np.concatenate([np.sin(A)[:, None], dprod], axis=1), "z": np.zeros(12)}
    for n, exact in (("A", exact_A), ("B", exact_B)):
        for o in ("y", "z"):
            np.testing.assert_allclose(results[True][n].values[o], exact[o], rtol=1e-9, atol=1e-10)
    for n in point:
        np.testing.assert_array_equal(point[n], original[n])


def test_points_run_one_by_one_call_the_functions_own_trace_and_not_its_python():
    """With ``traced`` (the precision rule's graph, ``ModelGraph.callable``), the
    handful of points of fast-mode probes are calls of that graph: the model's
    Python does not run again, the joint directional derivatives meet their
    closed forms, and they agree with the eager points within their error estimates."""
    from types import SimpleNamespace

    import tensorflow as tf

    from gradcli.verdicts.culprit import ModelGraph

    model, point = _two_input_model()
    calls = []

    def counted(v):
        calls.append(1)
        return model(v)

    outputs = {o: np.asarray(t) for o, t in model({n: tf.constant(v) for n, v in point.items()}).items()}
    traced = ModelGraph(SimpleNamespace(point=point, function=counted, outputs=outputs, wrt=["A", "B"])).callable()
    rng = np.random.default_rng(5)
    u = {n: rng.standard_normal((3,) + point[n].shape) for n in ("A", "B")}
    eager = FiniteDifferences(counted, point, ["y", "z"], wrt=["A", "B"], joint=True).along_joint(u)
    before = len(calls)
    fd = FiniteDifferences(counted, point, ["y", "z"], wrt=["A", "B"], joint=True, traced=traced)
    through = fd.along_joint(u)
    assert len(calls) == before and fd.evaluations == 2 * 2 * 3  # 2 signs x 2 levels x 3 probes, no Python
    A, B = point["A"], point["B"]
    t0, t1 = np.tanh(B.ravel()[:2])
    uA, uB = u["A"].reshape(3, -1), u["B"].reshape(3, -1)
    exact = {
        "y": np.stack([
            np.sum(np.cos(A).ravel() * B.ravel() * uA + np.sin(A).ravel() * uB, axis=1),
            (1 - t0**2) * t1 * uB[:, 0] + t0 * (1 - t1**2) * uB[:, 1],
        ], axis=1),
        "z": np.sum(3 * A.ravel() ** 2 * uA, axis=1),
    }
    for o in ("y", "z"):
        np.testing.assert_allclose(through.values[o], exact[o], rtol=1e-8, atol=1e-10)
        # Round-off differs between the graph and eager ops (a sum's order),
        # amplified by 1/h: within both error estimates, never more.
        assert np.all(np.abs(through.values[o] - eager.values[o]) <= through.errors[o] + eager.errors[o])
    # The graph is that function's at those shapes: kept for another point of
    # the same shapes, dropped for another function or other shapes.
    assert fd.anew(point={n: v + 1.0 for n, v in point.items()}).traced is traced
    assert fd.anew(function=model).traced is None
    assert fd.anew(point={**point, "A": np.zeros(3)}).traced is None
    # No traced loop for a large group once the function is traced: each point is one call of its graph.
    big = {"x": np.zeros(6_000_000)}
    assert FiniteDifferences(lambda v: v, big, [], wrt=["x"])._loops(1, 6_000_000)
    assert not FiniteDifferences(lambda v: v, big, [], wrt=["x"], traced=lambda v: v)._loops(1, 6_000_000)


def test_in_place_differences_of_a_float32_input_keep_its_dtype():
    """A float32 input is set in place in a float32 variable: the model sees
    float32 (it would raise on float64 here), steps follow float32's eps."""
    import tensorflow as tf

    def model(v):
        tf.debugging.assert_type(v["w"], tf.float32)
        return {"y": tf.reduce_sum(tf.cast(v["w"], tf.float64) ** 2 * v["x"])}

    point = {"w": np.linspace(0.5, 2.0, 40).astype(np.float32), "x": np.full(40, 3.0)}
    fd = FiniteDifferences(model, point, ["y"], wrt=["w", "x"])
    d = fd.along_axes("w")
    assert not fd.eager
    np.testing.assert_allclose(d.values["y"], 6.0 * point["w"].astype(np.float64), rtol=1e-3)


def test_xla_where_it_pays_and_on_two_workers_gives_the_same_differences(monkeypatch):
    """With the XLA threshold at 0 s a float64 group compiles after its first
    timed plain call and runs on two worker threads (each with its own
    variable); both loops' differences lie within their own error estimates of
    the closed form d/dx_i sum(exp(x) + x**2) = exp(x_i) + 2 x_i, and of each
    other (XLA may sum in another order: equal to round-off, not bit for bit)."""
    import tensorflow as tf

    from gradcli.numerics import in_place

    monkeypatch.setattr(in_place, "XLA_PAYS_SECONDS", 0.0)
    monkeypatch.setattr(in_place, "workers", lambda: 2)
    x = np.linspace(-2.0, 2.0, 301)
    model = lambda v: {"y": tf.reduce_sum(tf.exp(v["x"]) + v["x"] ** 2)}  # noqa: E731
    runs = {}
    for policy in (None, False):
        fd = FiniteDifferences(model, {"x": x}, ["y"], wrt=["x"], chunk=50, jit_compile=policy)
        runs[policy] = fd.along_axes("x")
        loop = fd._compiled[(("x",), "in place")]
        assert loop.compiled is (policy is None)  # compiled after chunk 2 (chunk 1 traced)
    exact = np.exp(x) + 2 * x
    xla, plain = runs[None], runs[False]
    assert np.all(np.abs(xla.values["y"] - exact) <= xla.errors["y"])
    assert np.all(np.abs(plain.values["y"] - exact) <= plain.errors["y"])
    assert np.all(np.abs(xla.values["y"] - plain.values["y"]) <= xla.errors["y"] + plain.errors["y"])
    assert np.max(xla.errors["y"]) < 1e-6  # not vacuous: 8 ulps of f (about 1e3) over h


def test_checks_running_at_once_share_the_cores_of_compiled_loops(monkeypatch):
    """A compiled loop takes every core alone, and its share while another check
    runs beside it (``in_place.sharing_cores``: the joint check beside the
    layer pass, ``analyses.check.model.beside``), on both threads; after it,
    every core again. A configured thread count still bounds it."""
    import threading

    import tensorflow as tf

    from gradcli.analyses.check.model import beside
    from gradcli.numerics import in_place

    monkeypatch.setattr(in_place.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.setattr(tf.config.threading, "get_intra_op_parallelism_threads", lambda: 0)
    assert in_place.workers() == 4
    started, release = threading.Event(), threading.Event()

    def joint_check():
        started.set()
        release.wait(10)
        return in_place.workers()

    running = beside(joint_check)
    assert started.wait(10)
    assert in_place.workers() == 2  # the layer pass's share, while the joint check runs
    release.set()
    assert running.result(10) == 2  # the joint check's share
    assert in_place.workers() == 4
    monkeypatch.setattr(tf.config.threading, "get_intra_op_parallelism_threads", lambda: 1)
    assert in_place.workers() == 1

@pytest.mark.parametrize("compiled", [False, True])
def test_the_in_place_loop_traces_the_model_once_and_evaluates_each_point_exactly(compiled):
    """One point an iteration: the loop's body holds one call of the model, so
    tracing the loop runs the model's Python once (a body holding both points
    of a direction ran it twice), plain and under XLA. Each value is the
    model at x with element i set to x_i + s (then x_i - s) and every other
    element as it was: y = sum(c * x**2) with c = 1..5, so up - down is
    4 c_i x_i s_i and up + down is 2 (sum(c x**2) + c_i s_i**2), bit for bit
    in powers of two."""
    import tensorflow as tf

    from gradcli.numerics.in_place import InPlaceLoop

    calls = []
    c = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0], tf.float64)

    def evaluate(v):
        calls.append(1)
        return {"y": tf.reduce_sum(c * v * v)}

    x = np.array([0.5, -1.0, 2.0, 0.25, 4.0])
    loop = InPlaceLoop(evaluate, x, ["y"], {"y": ()}, compiled, 4)
    part, steps = np.array([3, 0, 4]), np.array([0.5, 0.25, 2.0])  # padded to 4 per call
    up, down = loop(part, steps)
    assert len(calls) == 1
    total = float(np.sum(np.arange(1, 6) * x**2))
    ci = np.arange(1, 6)[part]
    np.testing.assert_array_equal(up["y"] - down["y"], 4 * ci * x[part] * steps)
    np.testing.assert_array_equal(up["y"] + down["y"], 2 * (total + ci * steps**2))
    up_again, _ = loop(part[:1], steps[:1])  # the variable holds x again after every point
    np.testing.assert_array_equal(up_again["y"], up["y"][:1])
    assert len(calls) == 1  # one trace for every call


def test_the_xla_rule_compiles_only_float64_groups_predicted_over_the_threshold():
    from gradcli.numerics.in_place import XLA_PAYS_SECONDS, InPlaceLoop

    def loop(dtype, policy, seconds):
        rule = InPlaceLoop(None, np.zeros(4, dtype), ["y"], {}, policy, 4)
        rule.seconds_per_direction = seconds
        return rule

    over = 2 * XLA_PAYS_SECONDS / 1000  # seconds per direction: 1000 directions are over
    assert loop(np.float64, None, over).worth_compiling(1000)
    assert not loop(np.float64, None, over).worth_compiling(100)  # predicted under
    assert not loop(np.float32, None, over).worth_compiling(1000)  # float32: keep TF's kernels
    assert not loop(np.float64, False, over).worth_compiling(1000)  # --no-xla
    assert not loop(np.float64, None, None).worth_compiling(1000)  # nothing timed yet


def test_a_new_group_compiles_from_its_first_call_when_another_group_predicts_it_pays():
    """The seconds per direction another group's plain loop measured stand in
    for a new group's own: over the threshold it compiles at once and never
    traces a plain loop; under it, it runs plain."""
    import tensorflow as tf

    from gradcli.numerics.in_place import XLA_PAYS_SECONDS, InPlaceLoop

    x = np.linspace(0.1, 1.0, 64)
    evaluate = lambda flat: {"y": tf.reduce_sum(tf.exp(flat))}  # noqa: E731
    for measured, compiles in ((XLA_PAYS_SECONDS, True), (XLA_PAYS_SECONDS / 1e4, False)):
        loop = InPlaceLoop(evaluate, x, ["y"], {"y": tf.TensorShape([])}, None, 64)
        up, down = loop(np.arange(64), np.full(64, 1e-6), remaining=0, measured=measured)
        assert loop.compiled is compiles and set(loop._loops) == {compiles}
        np.testing.assert_allclose((up["y"] - down["y"]) / 2e-6, np.exp(x), rtol=1e-6)


def test_small_inputs_share_a_group_up_to_the_limit_and_large_ones_are_alone():
    from gradcli.numerics.finite_diff import SHARED_GROUP_MAX

    sizes = {"big": SHARED_GROUP_MAX, "mid": SHARED_GROUP_MAX // 2, "a": 10, "b": 20, "c": SHARED_GROUP_MAX // 2}
    point = {n: np.zeros(k) for n, k in sizes.items()}
    fd = FiniteDifferences(lambda v: v, point, [], wrt=list(sizes))
    # Smallest first while the total fits: a, b, then one of mid / c (equal sizes,
    # first in wrt order), not both (30 + 2 * SHARED_GROUP_MAX / 2 > the limit).
    assert fd.group("a") == fd.group("b") == fd.group("mid") == ("mid", "a", "b")
    assert fd.group("c") == ("c",) and fd.group("big") == ("big",)
    assert FiniteDifferences(lambda v: v, point, [], wrt=list(sizes), joint=True).group("big") == tuple(sizes)


class RecordingEvaluator:
    """A ``PairEvaluator`` (the public protocol) that records the directions
    still to come with each chunk and evaluates f = sum of every input's sum
    of squares, whose central differences are exact: 2 x_i."""

    def __init__(self, point):
        self.point, self.remaining = point, []

    def evaluate_pairs(self, group, kind, part, steps, remaining=0):
        self.remaining.append((group, len(part), remaining))
        flat = np.concatenate([self.point[n].reshape(-1) for n in group])
        total = sum(float(np.sum(v * v)) for v in self.point.values())
        at = flat[part]
        up = total - at * at + (at + steps) ** 2
        down = total - at * at + (at - steps) ** 2
        return {"y": up}, {"y": down}


def test_the_xla_rule_counts_every_planned_direction_of_a_group():
    """The full check plans its pass (``plan_axes``): a chunk's directions still
    to come are the rest of its input's and every element of the group's
    inputs not taken yet, so a group of many small inputs can be predicted to
    pay for XLA as a whole. Truth: the sizes (30 + 20 + 10 elements, chunks of 8)."""
    sizes = {"a": 30, "b": 20, "c": 10}
    point = {n: np.linspace(0.5, 1.5, k) for n, k in sizes.items()}
    evaluator = RecordingEvaluator(point)
    fd = FiniteDifferences(lambda v: v, point, ["y"], wrt=list(sizes), chunk=8, evaluator=evaluator)
    assert fd.group("a") == ("a", "b", "c")
    fd.plan_axes(list(sizes))
    expected = []
    for n in sizes:
        d = fd.along_axes(n, settled=lambda values, roundoff: np.ones(len(values["y"]), bool))
        np.testing.assert_allclose(d.values["y"], 2 * point[n], rtol=1e-9)
        later = sum(sizes[m] for m in list(sizes)[list(sizes).index(n) + 1:])
        expected += [max(0, sizes[n] - start - 8) + later for start in range(0, sizes[n], 8)]
    assert [r for _, _, r in evaluator.remaining] == expected
    assert expected[0] == 22 + 30  # a's first chunk: 22 of a's own, all of b and c
    # Without a plan, only the input at hand's directions count (as for a lone call).
    evaluator.remaining.clear()
    FiniteDifferences(lambda v: v, point, ["y"], wrt=list(sizes), chunk=8, evaluator=evaluator).along_axes(
        "b", settled=lambda values, roundoff: np.ones(len(values["y"]), bool))
    assert [r for _, _, r in evaluator.remaining] == [12, 4, 0]


# -- FiniteDifferences: the second pass runs only where it is asked for -----------


def test_second_pass_runs_only_on_unsettled_directions():
    """f = sum(exp(x)): D(h) is exp(x) sinh(h)/h (closed form), Richardson's value
    exp(x) to about 1e-10; settled directions keep D(h), the others get R."""
    import tensorflow as tf

    x = np.linspace(-1.0, 1.0, 40)
    fd = FiniteDifferences(
        lambda v: {"y": tf.reduce_sum(tf.exp(v["x"]))}, {"x": x}, ["y"], wrt=["x"]
    )
    settle_even = lambda values, roundoff: np.arange(len(x)) % 2 == 0  # noqa: E731
    d = fd.along_axes("x", settled=settle_even)
    assert d.evaluations == 2 * 40 + 2 * 20
    assert fd.evaluations == d.evaluations
    h = d.steps
    even, odd = slice(0, None, 2), slice(1, None, 2)
    one_step = np.exp(x) * np.sinh(h) / h
    # D(h)'s round-off bound: ROUNDOFF_ULPS eps max|f| / h, as finite_diff states.
    f_max = np.exp(x + h) + np.sum(np.exp(x)) - np.exp(x)
    bound = ROUNDOFF_ULPS * np.finfo(float).eps * f_max / h
    assert np.all(np.abs(d.values["y"][even] - one_step[even]) <= bound[even])
    np.testing.assert_allclose(d.errors["y"][even], bound[even], rtol=1e-6)
    # Richardson's values lie within their own error estimate of exp(x), which is
    # small (the sum of 40 values sets the round-off).
    assert np.all(np.abs(d.values["y"][odd] - np.exp(x[odd])) <= d.errors["y"][odd])
    assert np.all(d.errors["y"][odd] <= 1e-7 * np.exp(x[odd]))
    assert list(d.settled) == list(np.arange(40) % 2 == 0)


# -- verdicts: two-pass against four-point on models with every kind of verdict ---

MODELS = [
    fixture("off_by_1e5.py"),
    fixture("cancelling_outputs.py"),
    fixture("large_values.py"),
    fixture("float32_swamped.py"),
    fixture("diag_bad_subgradient.py"),
    sample("kinks.py"),
    sample("fake_quant.py"),
    sample("sign_loss.py"),
    sample("tanh_net.py"),
]


def verdicts(result):
    return [(p.input, p.output, p.verdict, p.failed, p.n_failing) for p in result.pairs]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_two_pass_verdicts_equal_four_point_verdicts(path, monkeypatch):
    options = CheckOptions(mode="full")
    two_pass = check_model(load_model(path), options)
    monkeypatch.setattr(checking.FullCheck, "settled", lambda self, *args: None)
    four_point = check_model(load_model(path), options)
    assert verdicts(two_pass) == verdicts(four_point)
    assert two_pass.evaluations <= four_point.evaluations


def test_off_by_1e5_elements_all_get_the_second_level():
    """Every element of the wrong gradient is unsettled, so the reported numeric
    values are Richardson's (exp(x) to 1e-9), and all three fail."""
    run = gradcli("check", fixture("off_by_1e5.py"), "--mode", "full", "--json")
    assert run.exit_code == 1, run
    model = run.result["models"][0]
    pair = model["pairs"][0]
    assert pair["n_failing"] == 3
    for element in pair["failing"]:
        x = [0.3, -0.2, 1.1][element["input_index"][0]]
        assert element["numeric"] == pytest.approx(np.exp(x), rel=1e-9)
        assert element["analytic"] == pytest.approx(np.exp(x) * (1 + 1e-5), rel=1e-12)


# -- auto: which mode ran, why, and what a full check would cost ------------------


@pytest.fixture(scope="module")
def wide_model():
    """1,600 elements: more than one batch, so auto times one."""
    return load_model(fixture("auto_wide.py"))


def test_auto_runs_fast_when_the_full_check_would_exceed_the_budget(wide_model):
    result = check_model(wide_model, CheckOptions(mode="auto", budget=0.0))
    assert result.mode == "fast"
    assert result.predicted_full_seconds > 0
    assert any("auto ran the fast check" in n and "over the 0 s budget" in n for n in result.notes)
    assert all(p.verdict == PASS for p in result.pairs)


def test_auto_runs_full_within_the_budget_and_says_what_it_predicted(wide_model):
    result = check_model(wide_model, CheckOptions(mode="auto", budget=1e6))
    assert result.mode == "full"
    assert result.predicted_full_seconds > 0
    assert any("auto ran the full check: predicted" in n for n in result.notes)
    assert all(p.verdict == PASS and p.compared == 1600 for p in result.pairs)


def test_auto_predicts_from_the_fastest_timed_chunk(wide_model, monkeypatch):
    """One timed chunk slowed by 0.5 s (as by another process on the core)
    does not set the rate: W's 1,600 elements are 4 chunks of at most 512, the
    first untimed, the next two timed. Slowed, one chunk alone predicts at
    least 0.5 s / 512 * 1,600 = 1.56 s; the other runs in milliseconds."""
    from gradcli.numerics import finite_diff

    calls = []
    chunk = FiniteDifferences._chunk

    def slowed(self, *args, **kwargs):
        calls.append(len(args[2]))
        if len(calls) == 2:  # the first timed chunk
            time.sleep(0.5)
        return chunk(self, *args, **kwargs)

    monkeypatch.setattr(FiniteDifferences, "_chunk", slowed)
    result = check_model(wide_model, CheckOptions(mode="auto", budget=1e6))
    assert calls[:3] == [512, 512, 512]
    assert 0 < result.predicted_full_seconds < 0.5
    calls.clear()
    monkeypatch.setattr(finite_diff, "TIMED_CHUNKS", 1)  # the old rule: the slowed chunk alone
    assert check_model(wide_model, CheckOptions(mode="auto", budget=1e6)).predicted_full_seconds > 1.5


def test_auto_times_its_largest_input_for_every_input(monkeypatch):
    """Each direction of any input evaluates the whole model, so one input's
    rate is every input's: auto times the largest (W, 1,600 elements: its first
    chunk of 512 untimed, the next two timed) and not x (160 elements, a group
    of its own here), and predicts W's rate times all 1,760 elements. Each
    chunk is slowed by 0.05 s, so the rate is at least 0.05 s / 512 and the
    prediction at least 0.05 / 512 * 1,760 = 0.17 s; with x's elements left
    out it would be under 0.16 s."""
    from gradcli.numerics import finite_diff

    monkeypatch.setattr(finite_diff, "SHARED_GROUP_MAX", 1000)  # W and x in groups of their own
    model = load_model(fixture("auto_wide.py"), wrt=["W", "x"])
    groups = []
    chunk = FiniteDifferences._chunk

    def slowed(self, group, *args, **kwargs):
        groups.append(group)
        time.sleep(0.05)
        return chunk(self, group, *args, **kwargs)

    monkeypatch.setattr(FiniteDifferences, "_chunk", slowed)
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=model.wrt)
    predicted = fd.predict_axes_seconds(["x", "W"])
    assert groups == [("W",)] * 3
    assert 0.05 / 512 * 1760 <= predicted < 1.0
    assert fd.evaluations == 2 * 3 * 512


def test_the_rate_is_timed_once_per_function_and_taken_by_later_predictions(monkeypatch):
    """A second prediction of the same function (another failing input's
    re-check) takes the rate the first one timed: no chunk evaluated, and the
    prediction is that rate times the new input's directions, so the two
    predictions are in the ratio of their elements exactly (1,600 to 1,760).
    Another function (``anew``) times its own."""
    from gradcli.numerics import finite_diff

    monkeypatch.setattr(finite_diff, "SHARED_GROUP_MAX", 1000)  # W and x in groups of their own
    model = load_model(fixture("auto_wide.py"), wrt=["W", "x"])
    chunks = []
    chunk = FiniteDifferences._chunk
    monkeypatch.setattr(FiniteDifferences, "_chunk", lambda self, *a, **k: chunks.append(a[0]) or chunk(self, *a, **k))
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=model.wrt)
    both = fd.predict_axes_seconds(["x", "W"])
    assert len(chunks) == 3 and both > 0
    alone = fd.predict_axes_seconds(["W"])
    assert len(chunks) == 3 and fd.evaluations == 2 * 3 * 512
    assert alone / both == pytest.approx(1600 / 1760, rel=1e-12)
    other = fd.anew(function=model.function)
    assert other.predict_axes_seconds(["W"]) > 0 and len(chunks) == 6


def test_a_prediction_past_what_the_caller_decides_is_a_quick_timing(monkeypatch):
    """``predict_axes_seconds(names, beyond=...)``: QUICK_DIRECTIONS (8)
    directions of W run untimed (the trace), then two chunks of 8 timed. Each
    chunk is slowed by 0.05 s (QUICK_MIN_SECONDS: long enough to trust), so
    their rate is at least 0.05 / 8 s and W's 1,600 elements at least 10 s,
    over QUICK_MARGIN (1.5) times ``beyond`` = 1 s: that is the answer, from 48
    evaluations and no chunk of 512. Far below ``beyond`` the prediction goes
    on as without it (three chunks of 512, the rate they time kept, not the
    quick one). Unslowed, the quick chunks are too short to trust: the
    chunks are timed."""
    from gradcli.numerics import finite_diff

    monkeypatch.setattr(finite_diff, "SHARED_GROUP_MAX", 1000)  # W and x in groups of their own
    model = load_model(fixture("auto_wide.py"), wrt=["W", "x"])
    lengths = []
    chunk = FiniteDifferences._chunk

    def slowed(self, group, kind, part, *args, **kwargs):
        lengths.append(len(part))
        time.sleep(0.05)
        return chunk(self, group, kind, part, *args, **kwargs)

    monkeypatch.setattr(FiniteDifferences, "_chunk", slowed)
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=model.wrt)
    quick = fd.predict_axes_seconds(["W"], beyond=1.0)
    assert lengths == [8, 8, 8] and fd.evaluations == 2 * 3 * 8
    assert quick >= 0.05 / 8 * 1600
    lengths.clear()
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=model.wrt)
    timed = fd.predict_axes_seconds(["W"], beyond=1e6)
    assert lengths == [8, 8, 8, 512, 512, 512] and fd.evaluations == 2 * (3 * 8 + 3 * 512)
    assert 0.05 / 512 * 1600 <= timed < quick
    assert fd.predict_axes_seconds(["W"], beyond=1.0) == timed  # the timed rate, once there is one
    monkeypatch.setattr(FiniteDifferences, "_chunk", chunk)  # unslowed: 8 directions in well under 0.05 s
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=model.wrt)
    fd.predict_axes_seconds(["W"], beyond=1e-9)
    assert fd.evaluations == 2 * (3 * 8 + 3 * 512)


def test_auto_times_a_model_whose_eager_call_is_slow_but_whose_evaluations_are_fast(monkeypatch):
    """auto_slow_eager.py sleeps 100 ms in every eager call (once per trace).
    Its 2,000 elements at 2 evaluations of 100 ms / TRACE_SPEEDUP (200) each
    are about 2 s, under 10 budgets of 0.5 s: auto times its differences (a
    prediction, either way it goes). At the old speedup of 50 the same "bound"
    was 8 s, over 5 s, and auto ran fast without timing, on a model whose
    evaluations take microseconds (as a 2-layer keras-hub Llama whose eager
    call took 125 ms ran fast untimed, its full check 6 s)."""
    from gradcli.analyses.check import mode

    model = load_model(fixture("auto_slow_eager.py"))
    assert model.forward_seconds >= 0.1
    result = check_model(model, CheckOptions(mode="auto", budget=0.5))
    (note,) = [n for n in result.notes if n.startswith("auto ran")]
    assert "timed batch" in note and "each at least 2 evaluations" not in note, note
    assert 0 < result.predicted_full_seconds < 2000 * 2 * 0.1 / 50
    assert all(p.verdict == PASS for p in result.pairs)
    monkeypatch.setattr(mode, "TRACE_SPEEDUP", 50.0)
    bounded = check_model(model, CheckOptions(mode="auto", budget=0.5))
    assert any("each at least 2 evaluations" in n for n in bounded.notes), bounded.notes


def test_auto_on_a_small_model_runs_full_without_timing():
    run = gradcli("check", sample("two_by_two.py"), "--json", "--budget", "0")
    model = run.result["models"][0]
    assert model["mode"] == "full" and model["predicted_full_seconds"] is None
    assert any("one batch per input group" in n for n in model["notes"])
    assert model["evaluations"] == 2 * (3 + 3)


def test_budget_must_be_a_number_of_seconds():
    run = gradcli("check", sample("square.py"), "--budget", "-1")
    assert run.exit_code == 2, run
    assert "Invalid value for '--budget': must be >= 0, got -1.0" in run.stderr


def test_budget_is_read_from_pyproject(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli.check]\nbudget = 0\n")
    (tmp_path / "wide.py").write_text(open(fixture("auto_wide.py")).read())
    monkeypatch.chdir(tmp_path)
    run = gradcli("check", "wide.py", "--json")
    model = run.result["models"][0]
    assert model["mode"] == "fast", run
    assert any("over the 0 s budget" in n for n in model["notes"])


def test_a_cut_sample_takes_the_first_pass_its_timing_evaluated(monkeypatch):
    """A sampled re-check (``FastCheck.sampled_pairs``) checks the model as a
    function of the drawn elements, in the order drawn: here 1,600 of W's
    (auto_wide.py), timed on its first three chunks of 512. Cut to a prefix
    that keeps the 1,536 elements the timing evaluated (``timed_rows``), its
    first pass takes those chunks as they are (``take_timed``): no chunk at
    the first pass's steps is evaluated again, and D(h) equals, to the bit,
    the whole model's along the same elements."""
    from gradcli.analyses.check.fast import sampled_model

    model = load_model(fixture("auto_wide.py"), wrt=["W"])
    outputs = list(model.outputs)
    drawn = np.random.default_rng(5).permutation(model.point["W"].size)
    timed = FiniteDifferences(*_of(sampled_model(model, "W", drawn)), outputs, wrt=["W"])
    assert timed.predict_axes_seconds(["W"]) > 0 and timed.timed_rows("W") == 3 * 512
    cut = FiniteDifferences(*_of(sampled_model(model, "W", drawn[:1536])), outputs, wrt=["W"])
    cut.take_timed(timed)
    first_pass = cut.axis_steps("W", np.arange(1536)).tobytes()
    evaluated = []
    chunk = FiniteDifferences._chunk
    monkeypatch.setattr(FiniteDifferences, "_chunk", lambda self, group, kind, part, steps, *a, **k: (
        evaluated.append(np.asarray(steps).tobytes()) or chunk(self, group, kind, part, steps, *a, **k)))
    taken = cut.along_axes("W")
    assert not any(steps in first_pass for steps in evaluated)  # none of its steps again
    whole = FiniteDifferences(model.function, model.point, outputs, wrt=["W"]).along_axes("W", drawn[:1536])
    for o in outputs:
        np.testing.assert_array_equal(taken.values[o], whole.values[o])


def _of(model):
    """A model's (function, point), as ``FiniteDifferences`` takes them."""
    return model.function, model.point
