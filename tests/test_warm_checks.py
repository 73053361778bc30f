"""Warm checks (``gradcli.analyses.check.warm``): a function checked again in
the same process is checked with the program its earlier check traced, and
gets the cold check's verdict; a program that no longer computes the user's
function (a changed closure, a changed gradient function) is dropped and the
function checked as it is now.

Independent truth: closed forms (d/dx sin(x) x = cos(x) x + sin(x)), and the
eager products of ``numerics.autodiff`` for the program's own tests.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
import pytest

import gradcli
from gradcli.numerics import autodiff
from gradcli.render import json as json_render
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

X = np.linspace(0.1, 0.6, 6)


@pytest.fixture
def programs(monkeypatch):
    """How many checks took their Jacobian from a kept program."""
    used = []
    original = autodiff.Program.jacobians

    def counted(self, point):
        used.append(1)
        return original(self, point)

    monkeypatch.setattr(autodiff.Program, "jacobians", counted)
    return used


def fresh(function):
    """A new callable computing ``function``: checks of it start cold, whatever
    this process checked before (the kept programs are per callable)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        return function(*args, **kwargs)

    return call


def report(result) -> dict:
    """The check's JSON document without its timings, its numbers to 8
    digits: a program's products may differ from the eager ones by
    round-off (the order a graph sums in), and a proof's difference of zero
    may come out as 3e-17."""
    document = json_render.document("check", result)

    def plain(node):
        if isinstance(node, dict):
            return {k: plain(v) for k, v in node.items() if "seconds" not in k and k != "elapsed"}
        if isinstance(node, list):
            return [plain(v) for v in node]
        if isinstance(node, float) and np.isfinite(node):
            return 0.0 if abs(node) < 1e-12 else float(f"{node:.8g}")
        return node

    return plain(document)


def sine_times_x(x):
    return tf.sin(x) * x


@tf.custom_gradient
def _tanh_ignoring_dy(x):
    y = tf.tanh(x)

    def grad(dy):  # the upstream gradient is dropped: right only for dy = 1
        return 1 - y * y

    return y, grad


def ignores_dy(x):
    return _tanh_ignoring_dy(x)


@tf.custom_gradient
def _tanh_twice(x):
    y = tf.tanh(x)

    def grad(dy):  # twice the derivative
        return dy * 2 * (1 - y * y)

    return y, grad


def twice_the_derivative(x):
    return _tanh_twice(x) * x


@tf.custom_gradient
def _tanh(x):
    y = tf.tanh(x)

    def grad(dy):
        return dy * (1 - y * y)

    return y, grad


def own_tanh(x, w):
    return _tanh(x * w)


def cut(x, w):
    return {"y": tf.sin(x) * w, "z": tf.stop_gradient(x) * w}


@pytest.mark.parametrize("function, arguments, ok", [
    (sine_times_x, (X,), True),
    (own_tanh, (X, X[::-1]), True),
    (cut, (X, X[::-1]), False),  # z = stop_gradient(x) w: its gradient cut where z depends on x
    (ignores_dy, (X,), False),
    (twice_the_derivative, (X,), False),
])
def test_a_warm_check_gives_the_cold_checks_report(programs, function, arguments, ok):
    function = fresh(function)
    cold = gradcli.check(function, arguments)
    warm = [gradcli.check(function, arguments) for _ in range(2)]
    assert len(programs) == 2  # the second and third checks ran the kept program
    assert cold.ok is ok
    assert report(warm[0]) == report(cold) == report(warm[1])


def test_a_warm_checks_proof_compares_the_users_call_with_the_programs_first_product(programs, monkeypatch):
    """A warm check's first reverse pass (does any gradient reach the
    inputs?) is seeded with the proof's draw, through the kept program, and
    the proof compares the user's own call with that product rather than
    taking it again: the program's VJPs are each seeded once, and none with
    ones. The product is the closed form J^T c of tanh(x w) (each element's
    derivative (1 - tanh(x w)^2) times w for x, x for w)."""
    from gradcli.model.core import first_cotangents

    function = fresh(own_tanh)
    w = X[::-1]
    assert gradcli.check(function, (X, w)).ok
    seeded, served = [], autodiff.Program.vjps

    def recorded(self, point, seeds):
        products = served(self, point, seeds)
        seeded.extend(zip(seeds, products))
        return products

    monkeypatch.setattr(autodiff.Program, "vjps", recorded)
    result = gradcli.check(function, (X, w))
    assert result.ok and programs and result.models[0].call_proof.proven
    (model,) = result.models
    drawn = first_cotangents({"output": np.zeros(6)}, 0)["output"]
    at_draw = [product for seeds, product in seeded if np.array_equal(seeds["output"], drawn)]
    assert len(at_draw) == 1, [s["output"] for s, _ in seeded]
    assert not any(np.array_equal(seeds["output"], np.ones(6)) for seeds, _ in seeded)
    derivative = 1 - np.tanh(X * w) ** 2
    np.testing.assert_allclose(at_draw[0]["x"], drawn * derivative * w, rtol=1e-12)
    np.testing.assert_allclose(at_draw[0]["w"], drawn * derivative * X, rtol=1e-12)


def test_a_warm_check_fails_a_wrong_gradient_by_its_closed_form(programs):
    function = fresh(twice_the_derivative)
    for _ in range(3):
        result = gradcli.check(function, (X,), mode="full")
        pair = result.models[0].pairs[0]
        assert pair.verdict == "mismatch" and pair.failed
    assert programs
    assert not result.ok


SCALE = {"value": 2.0}


@tf.custom_gradient
def _scaled_sine(x):
    def grad(dy):  # hard-codes the scale 2: right while SCALE is 2
        return dy * 2.0 * tf.cos(x)

    return SCALE["value"] * tf.sin(x), grad


def scaled_sine(x):
    return _scaled_sine(x)


def test_a_changed_closure_is_checked_as_it_is_now(programs):
    """The program traced while the scale was 2 computes 2 sin(x) with the
    gradient 2 cos(x): it would pass. The function now computes 3 sin(x),
    and its gradient (still 2 cos(x)) is wrong by a third."""
    function = fresh(scaled_sine)
    SCALE["value"] = 2.0
    try:
        assert all(gradcli.check(function, (X,)).ok for _ in range(3))
        assert len(programs) == 2
        SCALE["value"] = 3.0
        changed = gradcli.check(function, (X,))
    finally:
        SCALE["value"] = 2.0
    assert not changed.ok
    assert changed.models[0].pairs[0].verdict == "mismatch"
    assert len(programs) == 2  # the kept program did not compute this call's outputs: dropped


FACTOR = {"value": 1.0}


@tf.custom_gradient
def _tanh_factored(x):
    y = tf.tanh(x)

    def grad(dy):  # right while FACTOR is 1; the forward pass does not read it
        return dy * FACTOR["value"] * (1 - y * y)

    return y, grad


def factored(x):
    return _tanh_factored(x) * x


def test_a_changed_gradient_function_is_checked_as_it_is_now(programs):
    """The forward pass is unchanged, so only the proof (the kept program's VJP
    against the user's own eager call) sees that the gradient function now
    computes another derivative: the call is checked cold and fails."""
    function = fresh(factored)
    FACTOR["value"] = 1.0
    try:
        assert all(gradcli.check(function, (X,)).ok for _ in range(3))
        assert len(programs) == 2
        FACTOR["value"] = 1.5
        changed = gradcli.check(function, (X,))
    finally:
        FACTOR["value"] = 1.0
    assert not changed.ok
    pair = changed.models[0].pairs[0]
    assert pair.verdict == "mismatch" and pair.failed
    assert not changed.models[0].call_proof.differs  # the cold check proves the function it checked


def plainly_scaled(x):
    return SCALE["value"] * tf.sin(x) * x


def test_a_changed_closure_of_a_vouched_load_is_loaded_again(programs):
    """From its third check the function's load is not traced (the kept
    program vouches it runs no stateful op). Its scale changed, the program
    no longer computes it: loaded again and checked cold, with the report of
    a first check of the function as it is now (3 sin(x) x)."""
    function = fresh(plainly_scaled)
    try:
        assert all(gradcli.check(function, (X,)).ok for _ in range(3))
        assert len(programs) == 2
        SCALE["value"] = 3.0
        changed = gradcli.check(function, (X,))
        first = gradcli.check(fresh(plainly_scaled), (X,))
    finally:
        SCALE["value"] = 2.0
    assert len(programs) == 2
    assert report(changed) == report(first)
    worst = changed.models[0].pairs[0].worst  # J = diag(3 (cos(x) x + sin(x)))
    (i,), (j,) = worst.output_index, worst.input_index
    assert worst.analytic == pytest.approx(3 * (np.cos(X[i]) * X[i] + np.sin(X[i])) if i == j else 0.0, rel=1e-12)


DRAWS = {"on": False}


def sometimes_noisy(x):
    """sin(x) x, plus a random draw while DRAWS is on."""
    y = tf.sin(x) * x
    return y + 1e-3 * tf.random.uniform(tf.shape(x), dtype=x.dtype) if DRAWS["on"] else y


def test_a_function_that_starts_drawing_is_loaded_again_and_seeded(programs):
    """Its third load took the kept program's word that it runs no stateful
    op (not traced, not seeded). When it starts drawing random numbers the
    program no longer computes it: the model is loaded again (traced, so
    seeded) and checked cold, with the report of a first check of it in a
    process, draws included: every random choice reproducible."""
    function = fresh(sometimes_noisy)
    try:
        assert all(gradcli.check(function, (X,)).ok for _ in range(3))
        assert len(programs) == 2
        DRAWS["on"] = True
        changed = gradcli.check(function, (X,))
        first = gradcli.check(fresh(sometimes_noisy), (X,))
    finally:
        DRAWS["on"] = False
    assert len(programs) == 2
    assert report(changed) == report(first)


@tf.custom_gradient
def _noisy_square(x):
    def grad(dy):  # a fresh standard normal draw in every reverse pass
        return dy * 2 * x * (1 + 1e-3 * tf.random.normal(tf.shape(x), dtype=x.dtype))

    return x * x, grad


def noisy_gradient(x):
    return _noisy_square(x)


def test_a_nondeterministic_gradient_is_found_as_in_a_first_check(programs):
    """Its kept program's VJP differs from the user's own call (another
    draw): the program does not stand, the model is loaded again and checked
    as a first check, which finds the nondeterministic gradient, with the
    same draws every time."""
    function = fresh(noisy_gradient)
    results = [gradcli.check(function, (X,)) for _ in range(4)]
    first = gradcli.check(fresh(noisy_gradient), (X,))
    proof = first.models[0].call_proof
    assert not first.ok and proof.differs and proof.nondeterministic

    def finding(result):  # the culprit's own probe draws anew in every check, cold or warm
        model = result.models[0]
        return report(result)["result"]["models"][0]["call_proof"], [(p.verdict, p.failed) for p in model.pairs]

    assert all(finding(r) == finding(first) for r in results)


def noisy(x):
    return tf.sin(x) * x + 0.0 * tf.random.uniform(tf.shape(x), dtype=x.dtype)


def test_a_function_with_a_random_draw_keeps_no_program(programs):
    function = fresh(noisy)
    assert all(gradcli.check(function, (X,)).ok for _ in range(3))
    assert programs == []


def test_repeated_warm_checks_trace_nothing_more(programs):
    """TensorFlow warns when the same code is traced on five of its recent
    calls ("triggered tf.function retracing"): ten checks of one function
    trace it once, and the programs of eight functions, each checked three
    times, raise no warning either (every program runs the same code)."""
    messages = []

    class Recorder(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Recorder()
    logging.getLogger("tensorflow").addHandler(handler)
    try:
        function = fresh(sine_times_x)
        results = [gradcli.check(function, (X,)) for _ in range(10)]
        assert len(programs) == 9
        for _ in range(8):
            function = fresh(sine_times_x)
            results += [gradcli.check(function, (X,)) for _ in range(3)]
    finally:
        logging.getLogger("tensorflow").removeHandler(handler)
    assert all(r.ok for r in results)
    assert not [m for m in messages if "retracing" in m]
    assert len(programs) == 9 + 8 * 2


# -- the program's products against the eager ones and closed forms -----------


def as_function(f):
    return lambda values: {"y": f(values["x"])}


def test_the_programs_products_are_the_closed_forms():
    function = as_function(sine_times_x)
    program = autodiff.Program(function, {"x": tf.TensorSpec([6], tf.float64)}, ["x"], ["y"])
    point = {"x": X}
    derivative = np.cos(X) * X + np.sin(X)
    np.testing.assert_allclose(program.jacobians(point)[("y", "x")], np.diag(derivative), rtol=1e-14, atol=1e-15)
    c = np.arange(1.0, 7.0)
    (vjp,) = program.vjps(point, [{"y": c}])
    np.testing.assert_allclose(vjp["x"], c * derivative, rtol=1e-14)
    tangents = np.stack([np.ones(6), -np.arange(6.0)])
    jvps = program.batched_jvp(point, {"x": tangents}, ["y"])["y"]
    np.testing.assert_allclose(jvps, tangents * derivative, rtol=1e-14, atol=1e-15)
    stacked = np.stack([X, 2 * X, -X])
    np.testing.assert_allclose(program.many({"x": stacked})["y"], np.sin(stacked) * stacked, rtol=1e-15)


@tf.custom_gradient
def _wrong_shape(x):
    def grad(dy):  # a (1, 6) gradient for a (6,) input
        return tf.reshape(dy * tf.cos(x), (1, 6))

    return tf.sin(x), grad


def test_the_program_applies_the_shape_rule_as_the_eager_products_do():
    function = as_function(_wrong_shape)
    program = autodiff.Program(function, {"x": tf.TensorSpec([6], tf.float64)}, ["x"], ["y"])
    traced = program.jacobians({"x": X})[("y", "x")]
    eager = autodiff.jacobians(function, {"x": X}, ["x"], ["y"], mode="reverse").blocks[("y", "x")]
    assert isinstance(traced, autodiff.WrongShape)
    assert traced == eager == autodiff.WrongShape(expected=(6,), got=(1, 6))


LIMIT = {"value": 100.0}


@tf.custom_gradient
def _square_within_limit(x):
    def grad(dy):
        # 2x where |x| < LIMIT, 4x beyond it: the limit is read when the gradient is built
        return dy * tf.where(tf.abs(x) < LIMIT["value"], 2 * x, 4 * x)

    return x * x, grad


def square_within_limit(x):
    return _square_within_limit(x)


def test_the_spread_of_a_function_checked_again_is_kept_only_for_the_same_computation(programs, monkeypatch):
    """A gradient right at the point (|x| <= 0.6) and wrong beyond a limit its
    gradient function reads from Python when the gradient is built. Checked
    again and again unchanged, the spread's local checks run once: the fresh
    trace cuts out the same programs, fed the same values (``spread._KEPT``).
    With the limit lowered to 2 the program still proves at the point (the
    gradient there is 2x, as before), but the fresh trace's gradient differs
    from the kept one's: the spread runs again and fails the pair at the
    inputs scaled to magnitude 3 (truth: 4x against d(x^2)/dx = 2x on the
    elements past 2, X scaled by 5: 1.5 to 3). The kept finding's key is cut
    at the function's inputs (no state between them and the gradient): a
    check again runs nothing to find what the op saw (``seen_values``)."""
    from gradcli.verdicts import spread
    from gradcli.verdicts.graph import TracedGraph

    probed, ran = [], []
    original, seen_values = spread.check_op, TracedGraph.seen_values

    def counted(*args, **kwargs):
        probed.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(spread, "check_op", counted)
    monkeypatch.setattr(TracedGraph, "seen_values", lambda *a, **k: ran.append(1) or seen_values(*a, **k))
    function = fresh(square_within_limit)
    try:
        assert all(gradcli.check(function, (X,)).ok for _ in range(4))
        assert probed and len(programs) == 3
        probed.clear()
        ran.clear()
        again = gradcli.check(function, (X,))
        assert again.ok and not probed, len(probed)
        assert not ran, len(ran)
        LIMIT["value"] = 2.0
        changed = gradcli.check(function, (X,))
    finally:
        LIMIT["value"] = 100.0
    assert probed and ran and len(programs) == 5  # proven at the point: the program stands
    assert not changed.ok
    (pair,) = changed.models[0].pairs
    assert pair.verdict == "mismatch" and pair.culprit.checked == "own gradient at its inputs scaled to magnitude 3"
    assert pair.culprit.rel_error > 0.1, pair.culprit  # 4x against 2x on the elements past 2
