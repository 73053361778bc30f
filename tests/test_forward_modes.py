"""Forward mode taken eagerly and inside a tf.function (issue 35).

TensorFlow's forward mode differs between an eager accumulator and one inside
a traced function only at a ``tf.custom_gradient`` (``numerics.autodiff``'s
docstring): eagerly its rule fills in the tangent its stop-gradiented forward
ops leave out, traced it never does. The fixtures (``_forward_twins``) are a
custom softplus s(x) = log(1 + e^x) with the right rule dy * sigmoid(x) inside
loss = sum s(x)^2, so J t = sum 2 s(x) sigmoid(x) t; the wrong twin computes
its value inside ``tf.stop_gradient``, whose traced JVP is exactly 0.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import FIXTURES, check_json, fixture, pairs

sys.path.insert(0, str(FIXTURES))
import _forward_twins as twins  # noqa: E402

TRACED = "with the JVP taken inside a tf.function (as a compiled JVP or HVP takes it)"


def closed_form_jvp(x, t):
    s, sigmoid = np.log1p(np.exp(x)), 1.0 / (1.0 + np.exp(-x))
    return float(np.sum(2.0 * s * sigmoid * t))


@pytest.mark.parametrize("recorded", [False, True])
def test_the_seam_takes_the_jvp_eagerly_and_inside_one_trace(recorded):
    from gradcli.numerics import autodiff

    model, inputs = twins.softplus_model(recorded)
    x = np.asarray(inputs["x"])
    tangents = np.array([[0.3, -1.2, 0.7], [1.0, 0.5, -2.0]])

    def function(values):
        return {"output": model(values["x"])}

    truth = [closed_form_jvp(x, t) for t in tangents]
    eager = autodiff.batched_jvp(function, {"x": x}, {"x": tangents}, ["output"])["output"]
    traced = autodiff.traced_jvp(function, {"x": x}, {"x": tangents}, ["output"])["output"]
    np.testing.assert_allclose(eager, truth, rtol=1e-13)
    np.testing.assert_allclose(traced, truth if recorded else [0.0, 0.0], rtol=1e-13, atol=0.0)


def test_the_traced_jvp_of_a_weight_held_as_a_variable_is_its_derivative():
    """A weight the user's code holds as a ``tf.Variable`` (``function.variables``) is
    a variable in the traced JVP too, made before the trace (a trace cannot make
    one from its own input: TensorFlow raised UnliftableError). f = sum(tanh(w x)):
    J_w t = sum(x (1 - tanh(w x)^2) t)."""
    import tensorflow as tf

    from gradcli.numerics import autodiff

    x, w = np.array([0.4, -1.1, 2.0]), np.array([0.7, 0.2, -0.5])
    held = tf.Variable(w)

    def function(values):
        assert isinstance(values["w"], tf.Variable), values["w"]  # as in the user's training step
        return {"output": tf.reduce_sum(tf.tanh(values["w"] * values["x"]))}

    function.variables = {"w": held}
    tangents = np.array([[1.0, 0.0, 0.0], [0.3, -0.8, 1.5]])
    traced = autodiff.traced_jvp(function, {"x": x, "w": w}, {"w": tangents}, ["output"])["output"]
    truth = [np.sum(x * (1 - np.tanh(w * x) ** 2) * t) for t in tangents]
    np.testing.assert_allclose(traced, truth, rtol=1e-13)


@pytest.mark.parametrize("name, eager_batches, verdict, eager_jvp", [
    ("fwd_traced_only_ok.py", [1], "pass", lambda x, t: closed_form_jvp(x, t)),
    ("fwd_traced_only_wrong.py", [1], "mismatch", lambda x, t: closed_form_jvp(x, t)),
    # x * stop_gradient(x) under the rule 2x: the eager JVP differentiates the forward ops, x t
    ("forward_only_wrong.py", [1, 2], "mismatch", lambda x, t: x * t),
])
def test_the_eager_jvp_along_the_first_tangent_shows_whether_reverse_modes_stand_for_it(
        monkeypatch, name, eager_batches, verdict, eager_jvp):
    """The full check holds reverse mode's Jacobian. Where the eager JVP along
    the first tangent equals J t from it to round-off, the eager JVP is taken
    along that tangent alone and reverse mode's J t stands for the others
    (``FullCheck.eager_shown``): the custom softplus twins, whose eager JVP is
    right (the wrong twin's traced JVP is 0, and the traced way finds it).
    Where they differ (a custom square whose eager JVP is x t against the
    rule's 2x t), the eager JVP is taken along every tangent. Either way the
    eager way's J t along every tangent is the closed form of what eager
    forward mode computes, and the traced JVPs (the user wrote a custom
    gradient) are taken once, for the traced way."""
    from gradcli.analyses.check import check_model
    from gradcli.analyses.check.full import FullCheck
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff
    from gradcli.options import CheckOptions

    eager, traced, served = [], [], []
    batched, in_trace, asked = autodiff.batched_jvp, autodiff.traced_jvp, FullCheck.batched_jvp
    monkeypatch.setattr(autodiff, "batched_jvp", lambda f, p, t, o: eager.append(len(t["x"])) or batched(f, p, t, o))
    monkeypatch.setattr(autodiff, "traced_jvp", lambda f, p, t, o, r=None: traced.append(len(t["x"])) or in_trace(f, p, t, o, r))

    def recorded(self, tangents, outputs):
        result = asked(self, tangents, outputs)
        served.append((self.traced_jvps, np.array(tangents["x"]), np.asarray(result[outputs[0]])))
        return result

    monkeypatch.setattr(FullCheck, "batched_jvp", recorded)
    model = load_model(fixture(name))
    result = check_model(model, CheckOptions(mode="full"))
    assert [p.verdict for p in result.pairs] == [verdict]
    assert eager == eager_batches  # the first tangent, then the others where needed
    assert traced == [3]  # once, for the traced way
    x = np.asarray(model.point["x"])
    (eager_way,) = [(t, j) for in_trace_way, t, j in served if not in_trace_way]
    assert len(eager_way[0]) == 3
    np.testing.assert_allclose(eager_way[1], [eager_jvp(x, t) for t in eager_way[0]], rtol=1e-12)


def test_an_eager_jvp_is_shown_equal_to_the_traced_one_only_to_round_off_and_with_the_margin():
    """``shown_equal``: 2^10 eps of the largest element apart at most, and only
    where that bound is 2^20 times below the check's rtol: float64 at its
    default rtol (1e-6), not float32, bfloat16 or an rtol set below 2.4e-7.
    A non-finite value, another shape or a difference past the bound is not
    shown equal."""
    import ml_dtypes

    from gradcli.analyses.check.full import shown_equal

    eps = np.finfo(np.float64).eps
    x = np.array([1.0, -2.0, 1e-3])
    assert shown_equal(x, x + np.array([0.0, 2000 * eps, 0.0]), 1e-6)  # 1000 units of the largest element
    assert not shown_equal(x, x + np.array([0.0, 4200 * eps, 0.0]), 1e-6)  # 2100 units
    assert shown_equal(x + 1j * x, x + 1j * x, 1e-6)
    assert not shown_equal(x + 1j * x, x - 1j * x, 1e-6)  # complex values compared as complex
    assert not shown_equal(x, x, 1e-8)  # the margin: 2^10 eps x 2^20 = 2.4e-7 > 1e-8
    assert not shown_equal(x.astype(np.float32), x.astype(np.float32), 1e-3)
    assert not shown_equal(x.astype(ml_dtypes.bfloat16), x.astype(ml_dtypes.bfloat16), 1e-1)
    assert not shown_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), 1e-6)
    assert not shown_equal(x, x[:2], 1e-6)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_jvp_wrong_only_inside_a_tf_function_fails_and_says_so(mode):
    run, document = check_json(fixture("fwd_traced_only_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "mismatch" and not pair["reverse_failed"], pair
    assert TRACED in pair["explanation"], pair
    forward, numeric = pair["forward_probe"]
    assert forward == 0.0 and abs(numeric) > 1e-3, pair  # the traced JVP is exactly 0; J u is not
    assert pair["culprit"]["site"]["description"].startswith("tf.custom_gradient softplus: forward mode differentiates")


def test_the_right_twin_passes_both_ways():
    run, document = check_json(fixture("fwd_traced_only_ok.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass" and not any("forward mode" in w for w in pair["warnings"]), pair


def test_a_model_that_cannot_be_traced_is_checked_eagerly_with_a_warning():
    run, document = check_json(fixture("fwd_untraceable_custom.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass", pair
    (warning,) = [w for w in pair["warnings"] if "inside a tf.function" in w]
    assert warning.startswith("forward mode not checked inside a tf.function (as a compiled JVP or HVP takes it): "
                              "the model cannot be traced (AttributeError:"), warning
    assert warning.endswith("; checked eagerly only"), warning


def test_warm_checks_report_the_traced_jvp_as_a_cold_check_does():
    import gradcli

    model, inputs = twins.softplus_model(recorded=False)
    explanations = []
    for _ in range(3):  # the first check is cold; the second and third run the kept program
        result = gradcli.check(model, (inputs["x"],), mode="full")
        (pair,) = result.models[0].pairs
        assert not result.ok and pair.forward_probe[0] == 0.0, pair
        explanations.append(pair.explanation)
    assert TRACED in explanations[0] and explanations[1:] == explanations[:1] * 2, explanations


def test_only_a_custom_gradient_the_user_wrote_takes_forward_mode_both_ways():
    """The eager JVP is taken beside the traced one where the user wrote a
    ``tf.custom_gradient`` (the fixtures' softplus); a library's (TensorFlow
    Probability's ``bessel_ive`` holds several, in its while loops) is the
    library's code, as for the spread rule, and the model's JVPs are then
    taken traced only: one trace, not an eager JVP op by op through each loop."""
    tf = pytest.importorskip("tensorflow")
    tfp = pytest.importorskip("tensorflow_probability")
    from gradcli.verdicts.graph import holds_custom_gradient

    model, inputs = twins.softplus_model(False)
    x = tf.constant(np.asarray(inputs["x"]))
    own = tf.function(lambda x: model(x)).get_concrete_function(x).graph
    library = tf.function(lambda z: tfp.math.bessel_ive(tf.constant(0.5, tf.float64), z)).get_concrete_function(
        tf.constant([1.0, 2.0], tf.float64)).graph
    assert holds_custom_gradient(own) and holds_custom_gradient(own, written_by_user=True)
    assert holds_custom_gradient(library)  # the library does hold one...
    assert not holds_custom_gradient(library, written_by_user=True)  # ...written by TFP, not the user


def _two_outputs(kink=False):
    """y1 = sin(a) b (+ relu(c), at its kink c = 0, with ``kink``), y2 = a^2 + c^3:
    b reaches only y1; c reaches only y2 unless ``kink``."""
    import tensorflow as tf

    def model(a, b, c):
        y1 = tf.sin(a) * b + (tf.nn.relu(c) if kink else 0.0)
        return {"y1": y1, "y2": a * a + c * c * c}

    values = {"a": np.array([0.3, -0.8]), "b": np.array([1.5, 0.4]),
              "c": np.array([0.0, 0.0]) if kink else np.array([0.6, -1.1])}
    return model, values


def _recorded_jvps(monkeypatch):
    """Every batch of forward-mode JVPs a check takes: (tangents, outputs, JVPs)."""
    from gradcli.numerics import autodiff

    calls, taken = [], autodiff.batched_jvp

    def recording(function, point, tangents, outputs):
        jvps = taken(function, point, tangents, outputs)
        calls.append(({n: np.array(t) for n, t in tangents.items()}, list(outputs), jvps))
        return jvps

    monkeypatch.setattr(autodiff, "batched_jvp", recording)
    return calls


def test_outputs_whose_left_out_inputs_cannot_reach_them_share_one_batch_of_jvps(monkeypatch):
    """y1's inputs are a, b and y2's a, c: c has no path to y1 and b none to y2,
    so one forward pass per probe along (a, b, c) serves both outputs. Each
    output's J u is its closed form along its own inputs (the tangent of an
    input that cannot reach it adds nothing)."""
    import gradcli

    calls = _recorded_jvps(monkeypatch)
    model, values = _two_outputs()
    result = gradcli.check(model, values, mode="full")
    assert result.ok, result
    assert len(calls) == 1, [(sorted(t), o) for t, o, _ in calls]
    tangents, outputs, jvps = calls[0]
    assert sorted(tangents) == ["a", "b", "c"] and sorted(outputs) == ["y1", "y2"]
    a, b, c = values["a"], values["b"], values["c"]
    ta, tb, tc = tangents["a"], tangents["b"], tangents["c"]
    np.testing.assert_allclose(jvps["y1"], np.cos(a) * b * ta + np.sin(a) * tb, rtol=1e-14)
    np.testing.assert_allclose(jvps["y2"], 2 * a * ta + 3 * c * c * tc, rtol=1e-14)


def test_an_output_a_left_out_input_reaches_takes_its_own_batch(monkeypatch):
    """With relu(c) in y1 at its kink (c = 0), the pair (c, y1) is no trusted
    verdict and is left out of y1's forward probe, yet c reaches y1: a joint
    tangent along c would move y1's J u, so y1 takes its batch along (a, b)
    alone, and y2 (which b cannot reach) the one along (a, b, c)."""
    import gradcli

    calls = _recorded_jvps(monkeypatch)
    model, values = _two_outputs(kink=True)
    result = gradcli.check(model, values, mode="full")
    verdicts = {(p.input, p.output): p.verdict for p in result.models[0].pairs}
    assert verdicts[("c", "y1")] not in ("pass", "mismatch", "zero"), verdicts
    batches = sorted((tuple(sorted(t)), tuple(sorted(o))) for t, o, _ in calls)
    assert batches == [(("a", "b"), ("y1",)), (("a", "b", "c"), ("y2",))], batches
    for tangents, outputs, jvps in calls:
        a, b = values["a"], values["b"]
        if outputs == ["y1"]:
            np.testing.assert_allclose(jvps["y1"], np.cos(a) * b * tangents["a"] + np.sin(a) * tangents["b"],
                                       rtol=1e-14)


def test_outputs_share_no_batch_where_the_graph_cannot_say_whether_an_input_reaches_them(monkeypatch):
    """The same two outputs when the trace's path analysis fails: no output
    is served along inputs it may be reached by, so each takes the batch
    along its own inputs, and each J u is still its closed form."""
    import gradcli
    from gradcli.verdicts.graph import TracedGraph

    def fails(self, name, output):
        raise RuntimeError("no answer")

    monkeypatch.setattr(TracedGraph, "reaches", fails)
    calls = _recorded_jvps(monkeypatch)
    model, values = _two_outputs()
    assert gradcli.check(model, values, mode="full").ok
    batches = sorted((tuple(sorted(t)), tuple(o)) for t, o, _ in calls)
    assert batches == [(("a", "b"), ("y1",)), (("a", "c"), ("y2",))], batches
    a, b, c = values["a"], values["b"], values["c"]
    for tangents, outputs, jvps in calls:
        expected = (np.cos(a) * b * tangents["a"] + np.sin(a) * tangents["b"] if outputs == ["y1"]
                    else 2 * a * tangents["a"] + 3 * c * c * tangents["c"])
        np.testing.assert_allclose(jvps[outputs[0]], expected, rtol=1e-14)


def test_forward_mode_at_many_shapes_is_exact_with_one_relaxed_trace_per_op():
    """Every forward-mode product runs with TensorFlow's JVP functions traced for
    relaxed shapes (``numerics.jvp_functions``): an op met at six shapes is
    traced at most twice, not six times, and every JVP is still the closed form
    d/dx [x atan(x)] u = (atan x + x / (1 + x^2)) u. TensorFlow's own rule is back after."""
    from tensorflow.python.eager import forwardprop

    from gradcli.numerics import autodiff

    def function(values):
        return {"y": values["x"] * autodiff.tf.math.atan(values["x"])}

    rng = np.random.default_rng(7)
    traces = forwardprop._TRACE_COUNT.get("Atan", 0)
    for shape in [(3,), (2, 5), (4, 1, 3), (7,), (1, 9), (2, 2, 2)]:
        x, u = rng.standard_normal(shape), rng.standard_normal(shape)
        (y,) = autodiff.jvp(function, {"x": x}, {"x": u}).values()
        np.testing.assert_allclose(y, (np.arctan(x) + x / (1.0 + x * x)) * u, rtol=1e-14, atol=1e-15)
    assert forwardprop._TRACE_COUNT.get("Atan", 0) - traces <= 2
    assert forwardprop._TRACE_COUNT_LIMIT == 32


def _stitch_function(values):
    """earn_stitch_duplicate's function: the JVP of its Mul meets a
    ``tf.IndexedSlices`` tangent (dynamic_stitch's gradient is a gather), which
    the front hands to TensorFlow's dispatch. Forward mode transposes that
    gradient, which gathers the upstream for every data element, the
    overwritten ``a[1]`` too: t_a[0] - 2 t_a[1] - 2 t_b[0] + 4 t_b[1]."""
    tf = __import__("tensorflow")
    a, b = values["a"], values["b"]
    merged = tf.dynamic_stitch([tf.constant([0, 1]), tf.constant([1, 2])], [a, b])
    return {"y": tf.reduce_sum(merged * tf.constant([1.0, -2.0, 4.0], a.dtype))}


def _atan_function(values):
    """J t = (atan x + x / (1 + x^2)) t, elementwise."""
    return {"y": values["x"] * __import__("tensorflow").math.atan(values["x"])}


def test_the_jvp_front_gives_tensorflows_own_products_to_the_bit_and_skips_only_its_lookup(monkeypatch):
    """``jvp_functions.SignatureFront``: TensorFlow's JVP dispatch with a
    dictionary keyed by the exact signature in front. Eagerly and inside a
    trace, with a ``tf.IndexedSlices`` tangent (handed to TensorFlow's dispatch)
    and at several shapes, every product is the closed form and the same to the
    bit as with TensorFlow's dispatch alone. A second JVP at the same signature
    traces and looks up nothing (TensorFlow's ``trace_function`` is not called
    once), and once gradcli's forward mode is left, a JVP of TensorFlow's own
    goes through TensorFlow's dispatch again (the front sees none of its ops)."""
    import tensorflow as tf

    from gradcli.numerics import autodiff, jvp_functions

    rng = np.random.default_rng(11)
    cases = [(_atan_function, {"x": rng.standard_normal(shape)}) for shape in [(3,), (2, 4), (5,)]]
    cases.append((_stitch_function, {"a": np.array([0.7, 1.9]), "b": np.array([-0.6, 0.25])}))

    def closed_form(function, point, t):
        if function is _stitch_function:
            return t["a"][:, 0] - 2 * t["a"][:, 1] - 2 * t["b"][:, 0] + 4 * t["b"][:, 1]
        x = point["x"]
        return (np.arctan(x) + x / (1.0 + x * x)) * t["x"]

    fronted = jvp_functions._fronted
    for function, point in cases:
        tangents = {n: rng.standard_normal((3,) + v.shape) for n, v in point.items()}
        for take in (autodiff.batched_jvp, autodiff.traced_jvp):
            monkeypatch.setattr(jvp_functions, "_fronted", lambda on: None)  # TensorFlow's dispatch stays
            alone = take(function, point, tangents, ["y"])["y"]
            monkeypatch.setattr(jvp_functions, "_fronted", fronted)
            front = take(function, point, tangents, ["y"])["y"]
            np.testing.assert_array_equal(front, alone)
            np.testing.assert_allclose(front, closed_form(function, point, tangents), rtol=1e-13, atol=1e-15)

    from tensorflow.python.eager.polymorphic_function import tracing_compilation

    traced = []
    trace_function = tracing_compilation.trace_function
    monkeypatch.setattr(tracing_compilation, "trace_function", lambda *a, **k: traced.append(1) or trace_function(*a, **k))
    monkeypatch.setattr(jvp_functions._FRONT, "trace_function", tracing_compilation.trace_function)
    point = {"x": rng.standard_normal((2, 4))}
    autodiff.jvp(_atan_function, point, {"x": np.ones((2, 4))})  # keyed (the cases above met it)
    assert traced == []
    assert jvp_functions._KEPT.entries == 0

    keys = set(jvp_functions._FRONT.functions)
    x = tf.constant(rng.standard_normal(7))
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        y = tf.math.cosh(x)  # an op and shape the front never met
    np.testing.assert_allclose(accumulator.jvp(y), np.sinh(x.numpy()), rtol=1e-14)
    assert set(jvp_functions._FRONT.functions) == keys


def test_functions_run_eagerly_entered_on_two_threads_in_turn_is_restored_by_the_last():
    """TensorFlow's switch is process-wide: entries on two threads that
    overlap (the first leaves while the second is inside) leave it as found
    once both have left, and on for as long as either is inside. Each entry
    saving and restoring its own view left it on for the rest of the process."""
    import threading

    import tensorflow as tf

    from gradcli.numerics.autodiff import functions_run_eagerly

    assert not tf.config.functions_run_eagerly()
    entered, left = threading.Event(), threading.Event()
    seen = {}

    def second():
        entered.wait(10)
        with functions_run_eagerly():
            left.set()  # the first leaves now, while this one is inside
            first_gone.wait(10)
            seen["inside, the first gone"] = tf.config.functions_run_eagerly()

    first_gone = threading.Event()
    thread = threading.Thread(target=second)
    thread.start()
    with functions_run_eagerly():
        entered.set()
        left.wait(10)
    first_gone.set()
    thread.join(10)
    assert seen == {"inside, the first gone": True}
    assert not tf.config.functions_run_eagerly()
