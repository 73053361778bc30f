"""The function checked is the user's own, called as the user calls it, in both modes.

Every model here is sin(x) (or sin(x) * w) whose custom gradient is written
wrongly by a relative ERROR; the truth is the closed form cos(x). Each way of
writing a model (decorated function, callable object, method, partial,
tf.function with and without input_signature, Keras layer) must fail when the
gradient is wrong and pass when it is right, through the command line and the
Python API alike.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from conftest import gradcli, line_of, pairs

X = [0.3, 0.7, -1.1]
#: A relative error in the custom gradient: 1000x the float64 tolerance.
ERROR = 1e-3

HEADER = """
import functools
import numpy as np
import tensorflow as tf

ERROR = {error!r}

@tf.custom_gradient
def wrong_sin(x):
    def grad(dy):
        return dy * tf.cos(x) * (1.0 + ERROR)
    return tf.sin(x), grad
"""

#: One way of writing the model per entry; each defines ``model`` and ``inputs``.
WAYS = {
    "decorated function": """
        @tf.custom_gradient
        def model(x):
            def grad(dy):
                return dy * tf.cos(x) * (1.0 + ERROR)
            return tf.sin(x), grad
    """,
    "two inputs, decorated": """
        @tf.custom_gradient
        def model(x, w):
            def grad(dy):
                return dy * tf.cos(x) * w * (1.0 + ERROR), dy * tf.sin(x)
            return tf.sin(x) * w, grad
    """,
    "callable object": """
        class SinOp:
            @tf.custom_gradient
            def __call__(self, x):
                def grad(dy):
                    return dy * tf.cos(x) * (1.0 + ERROR)
                return tf.sin(x), grad
        model = SinOp()
    """,
    "bound method": """
        class Net:
            def forward(self, x):
                return wrong_sin(x)
        model = Net().forward
    """,
    "partial": """
        @tf.custom_gradient
        def scaled(x, scale=1.0):
            # Called as partial(x): only x is an input of the custom gradient.
            def grad(dy):
                return dy * tf.cos(x) * scale * (1.0 + ERROR)
            return tf.sin(x) * scale, grad
        model = functools.partial(scaled, scale=tf.constant(1.0, tf.float64))
    """,
    "tf.function": """
        model = tf.function(wrong_sin)
    """,
    "tf.function with input_signature": """
        model = tf.function(wrong_sin, input_signature=[tf.TensorSpec([3], tf.float64)])
    """,
    "keyword-only parameter": """
        @tf.custom_gradient
        def model(x, *, offset=0.0):
            def grad(dy):
                return dy * tf.cos(x + offset) * (1.0 + ERROR)
            return tf.sin(x + offset), grad
    """,
    "keras layer": """
        import keras

        class SinLayer(keras.layers.Layer):
            def call(self, x):
                return wrong_sin(x)

        layer = SinLayer(dtype="float64")

        def model(x):
            return layer(x)
    """,
}


def write_model(tmp_path, way: str, error: float) -> str:
    inputs = '{"x": %r, "w": [1.5, -0.5, 2.0]}' % X if "two inputs" in way else '{"x": %r}' % X
    source = HEADER.format(error=error) + textwrap.dedent(WAYS[way]) + f"\ninputs = {inputs}\n"
    path = tmp_path / (way.replace(" ", "_").replace(",", "").replace(".", "_") + ".py")
    path.write_text(source)
    return str(path)


def cosine_block(x, w=None):
    """d sin(x_i) w_i / d x_j: the closed form, diagonal."""
    return np.diag(np.cos(x) * (1.0 if w is None else np.asarray(w)))


@pytest.mark.parametrize("way", sorted(WAYS))
def test_a_wrong_custom_gradient_fails_however_the_model_is_written(tmp_path, way):
    path = write_model(tmp_path, way, ERROR)
    run = gradcli("check", path, "--json", "--mode", "full")
    assert run.exit_code == 1, run
    pair = pairs(run.json())[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["failed"]
    # The numeric side is the closed form; the analytic side the user's gradient.
    w = [1.5, -0.5, 2.0] if "two inputs" in way else None
    truth = cosine_block(X, w)
    worst = pair["worst"]
    i = worst["input_index"][0]
    assert worst["numeric"] == pytest.approx(truth[i, i], rel=1e-8)
    assert worst["analytic"] == pytest.approx(truth[i, i] * (1 + ERROR), rel=1e-8)
    # The checked function is proven to be the user's own call.
    proof = run.json()["result"]["models"][0]["call_proof"]
    assert proof["proven"] and not proof["differs"]
    if way == "decorated function":  # the model itself is the culprit, at its own def line
        culprit = pair["culprit"]
        assert culprit["site"]["description"] == "tf.custom_gradient model"
        assert culprit["site"]["location"].endswith(f":{line_of(path, 'def model(x):')}")


@pytest.mark.parametrize("way", ["decorated function", "callable object", "partial", "tf.function"])
def test_the_same_models_written_right_pass(tmp_path, way):
    run = gradcli("check", write_model(tmp_path, way, 0.0), "--json", "--mode", "full")
    assert run.exit_code == 0, run


@pytest.mark.parametrize("way", ["decorated function", "callable object"])
def test_python_api_and_assert_gradients_ok_fail_a_wrong_custom_gradient_model(way):
    import tensorflow as tf

    import gradcli as api
    from gradcli.testing import assert_gradients_ok

    if way == "decorated function":
        @tf.custom_gradient
        def model(x):
            return tf.sin(x), lambda dy: dy * tf.cos(x) * (1.0 + ERROR)
    else:
        class SinOp:
            @tf.custom_gradient
            def __call__(self, x):
                return tf.sin(x), lambda dy: dy * tf.cos(x) * (1.0 + ERROR)
        model = SinOp()
    result = api.check(model, inputs={"x": X}, mode="full")
    (pair,) = result.models[0].pairs
    assert pair.verdict == "mismatch" and pair.failed
    assert pair.worst.numeric == pytest.approx(np.cos(X[pair.worst.input_index[0]]), rel=1e-8)
    with pytest.raises(AssertionError, match="mismatch"):
        assert_gradients_ok(model, inputs={"x": X})


def test_the_calling_rule_follows_the_signature():
    import functools

    from gradcli.model.calling import Calling

    def f(a, b, /, c, d=1, *args, e, f=2, **kw):
        return a, b, c, d, args, e, f, kw

    # Positional up to the first parameter no input gives; keyword-only by keyword.
    rule = Calling.of(f, ["c", "a", "b", "e"])
    assert rule.positional == ("a", "b", "c") and rule.keywords == ("e",)
    assert rule(f, {"a": 1, "b": 2, "c": 3, "e": 4}) == (1, 2, 3, 1, (), 4, 2, {})
    # A gap (d left to its default) sends what follows by keyword.
    def g(x, scale=1.0, shift=0.0):
        return x, scale, shift

    rule = Calling.of(g, ["shift", "x"])
    assert rule.positional == ("x",) and rule.keywords == ("shift",)
    assert rule(g, {"x": 1, "shift": 5}) == (1, 1.0, 5)
    # *args takes the extra inputs in the order given; partial's bound keywords stay bound.
    def h(*xs):
        return xs

    assert Calling.of(h, ["b", "a"])(h, {"a": 1, "b": 2}) == (2, 1)
    p = functools.partial(g, shift=3.0)
    assert Calling.of(p, ["x"])(p, {"x": 7}) == (7, 1.0, 3.0)


def test_a_checked_function_that_is_not_the_users_call_fails_the_model():
    """The proof itself: a Model whose differentiated function calls the
    custom-gradient function with keywords (so TensorFlow differentiates its
    forward ops) while the user's own call is positional."""
    import tensorflow as tf

    from gradcli.analyses.check import check_model
    from gradcli.model.calling import OwnCall
    from gradcli.model.loading import Model, normalize_outputs
    from gradcli.options import CheckOptions

    @tf.custom_gradient
    def wrong_sin(x):
        return tf.sin(x), lambda dy: dy * tf.cos(x) * (1.0 + ERROR)

    point = {"x": np.array(X)}
    model = Model(
        name="keywords", path="keywords", point=point, wrt=["x"], native_dtypes={"x": np.dtype("float64")},
        function=lambda values: normalize_outputs(wrong_sin(x=values["x"])),
        own_call=OwnCall(call=lambda data: normalize_outputs(wrong_sin(data["x"])), variables={},
                         description="wrong_sin(x)"),
    )
    model.outputs = {"output": np.sin(point["x"])}
    result = check_model(model, CheckOptions(mode="full"))
    # The keyword call differentiates sin's forward op: the pairs pass...
    assert [p.verdict for p in result.pairs] == ["pass"]
    # ...but the function is not the user's, so the model fails and says by how much:
    # |g - g_own| / (|g| + |g_own| + share of the whole) with one input (share 1, so the
    # denominator doubles): ERROR / (2 (2 + ERROR)) for a gradient scaled by 1 + ERROR.
    proof = result.call_proof
    assert proof.differs and not proof.proven and result.failed
    assert proof.rel_difference == pytest.approx(ERROR / (2 * (2 + ERROR)), rel=1e-6)
    assert proof.call == "wrong_sin(x)" and proof.input == "x"


def test_the_first_reverse_product_is_taken_once_and_reused_by_the_proof_and_the_path_rule(monkeypatch):
    """Loading a Keras model promoted to float64 takes one reverse-mode product
    at the point (its float64 gradient test) with the proof's cotangents; the
    rebuild's proof and the gradient-path rule reuse it instead of a reverse
    pass each, and a proof drawn from another seed takes its own."""
    import tensorflow as tf

    from conftest import fixture
    from gradcli.analyses.reach import require_gradient
    from gradcli.model.core import first_cotangents
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff
    from gradcli.verdicts import same_function

    model = load_model(fixture("by_layer_functional_ok.py"), rng_seed=3)
    point, cotangents, product = model.taken_vjp
    assert point is model.point
    drawn = first_cotangents(model.outputs, 3)
    assert cotangents.keys() == drawn.keys() and all(np.array_equal(cotangents[o], drawn[o]) for o in drawn)
    # The kept product is J^T c at the point: a fresh tape gives the same.
    values = {n: tf.constant(v) for n, v in model.point.items()}
    with tf.GradientTape() as tape:
        tape.watch([values[n] for n in model.wrt])
        out = model.function(values)
    fresh = tape.gradient([out[o] for o in cotangents], [values[n] for n in model.wrt],
                          output_gradients=[tf.constant(c) for c in cotangents.values()])
    for n, g in zip(model.wrt, fresh):
        np.testing.assert_allclose(product[n], g.numpy(), rtol=1e-12, atol=1e-15)

    calls = []
    vjp = autodiff.vjp
    monkeypatch.setattr(autodiff, "vjp", lambda *a, **k: calls.append(1) or vjp(*a, **k))
    proof = same_function.prove(model, 3)
    require_gradient(model, list(model.outputs))
    assert proof.proven and not proof.differs and calls == []
    assert same_function.prove(model, 4).proven and calls == [1]  # other cotangents: its own product


def test_the_reach_pass_takes_the_proofs_draw_and_the_proof_does_not_take_it_again(tmp_path, monkeypatch):
    """A model already in float64 has no loading product to reuse: the check's
    reach pass (is any gradient there at all?) is seeded with the proof's
    draw, not with ones, and kept; the proof then compares the user's own
    call with that product instead of taking it again. The kept product is
    J^T c of f(x) = sin(x) x in closed form."""
    from gradcli.analyses.reach import require_gradient
    from gradcli.model.core import first_cotangents
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff
    from gradcli.verdicts import same_function

    path = tmp_path / "sinx.py"
    path.write_text(textwrap.dedent("""
        import numpy as np
        import tensorflow as tf

        def model(x):
            return tf.sin(x) * x

        inputs = {"x": np.linspace(0.3, 2.0, 5)}
    """))
    model = load_model(str(path), rng_seed=5)
    assert model.taken_vjp is None  # nothing promoted: loading took no product
    outputs = list(model.outputs)
    require_gradient(model, outputs, seed=5)
    point, cotangents, product = model.taken_vjp
    drawn = first_cotangents(model.outputs, 5)
    assert point is model.point and cotangents.keys() == drawn.keys()
    assert all(np.array_equal(cotangents[o], drawn[o]) for o in drawn)
    x, (c,) = model.point["x"], drawn.values()
    np.testing.assert_allclose(product["x"], c * (np.cos(x) * x + np.sin(x)), rtol=1e-13)

    calls = []
    vjp = autodiff.vjp
    monkeypatch.setattr(autodiff, "vjp", lambda *a, **k: calls.append(1) or vjp(*a, **k))
    proof = same_function.prove(model, 5)
    assert proof.proven and not proof.differs and calls == []
    # Without the check's seed (the other commands) the pass is seeded with ones and keeps nothing.
    other = load_model(str(path), rng_seed=5)
    require_gradient(other, outputs)
    assert other.taken_vjp is None and calls == [1]


def test_a_keras_rebuild_that_is_not_the_users_function_is_dropped_for_the_model_itself(tmp_path):
    """A Keras model is checked through a float64 rebuild called statelessly;
    the proof calls the original model on its own variables. A custom layer
    whose config misses state set after construction rebuilds into another
    function: gradcli checks the model itself, in float32, and says why."""
    path = tmp_path / "forgetful.py"
    path.write_text(textwrap.dedent("""
        import keras
        import numpy as np

        class Scale(keras.layers.Layer):
            def build(self, shape):
                self.w = self.add_weight(shape=(shape[-1],), initializer="ones", name="w")
            def call(self, x):
                return x * self.w * getattr(self, "factor", 1.0)

        scale = Scale(name="scale")
        scale.factor = 3.0  # not in its config: a rebuild is made without it
        x = keras.Input((3,))
        model = keras.Model(x, scale(keras.layers.Dense(2, kernel_initializer="ones", name="dense")(x)))
        inputs = {"x": np.ones((2, 3), np.float32)}
    """))
    run = gradcli("check", path, "--json", "--mode", "full")
    assert run.exit_code == 0, run
    document = run.json()["result"]["models"][0]
    assert document["dtype"] == "float32" and document["call_proof"]["proven"]
    assert any(n.startswith("the float64 rebuild of the Keras model computes another function")
               for n in document["notes"])
    # d out[b, j] / d bias[j] = factor * w[j] = 3; d out[b, j] / d w[j] = 3 * (x . kernel[:, j]) = 9.
    found = pairs(run.json())
    assert found[("dense/bias", "output")]["worst"]["analytic"] == pytest.approx(3.0, rel=1e-6)
    assert found[("scale/w", "output")]["worst"]["analytic"] == pytest.approx(9.0, rel=1e-6)


def test_a_gradient_wrong_only_in_forward_mode_fails_in_full_and_fast_mode_naming_the_mode(tmp_path):
    """d/dx of x * stop_gradient(x) by forward ops is x, the custom gradient
    (2x) is right: only forward mode is wrong, only for x, never for w."""
    path = tmp_path / "forward_wrong.py"
    path.write_text(textwrap.dedent("""
        import tensorflow as tf

        @tf.custom_gradient
        def square(x):
            return x * tf.stop_gradient(x), lambda dy: dy * 2.0 * x

        def model(x, w):
            return square(x) * w

        inputs = {"x": [0.5, -1.5, 2.0], "w": [1.0, 2.0, 0.5]}
    """))
    for mode in ("full", "fast"):
        run = gradcli("check", path, "--json", "--mode", mode)
        assert run.exit_code == 1, run
        found = pairs(run.json())
        assert found[("x", "output")]["verdict"] == "mismatch"
        assert found[("x", "output")]["explanation"].startswith(
            "forward mode (ForwardAccumulator) disagrees with finite differences; reverse mode agrees"
        )
        assert found[("w", "output")]["verdict"] == "pass", mode
    # In full mode reverse mode matches the closed form 2 x w element by element.
    x_pair = pairs(gradcli("check", path, "--json", "--mode", "full").json())[("x", "output")]
    assert x_pair["max_abs_error"] < 1e-8 and not x_pair["reverse_failed"]
    # The code at fault: the custom gradient whose forward ops forward mode differentiates.
    culprit = x_pair["culprit"]
    assert culprit["site"]["description"].startswith(
        "tf.custom_gradient square: forward mode differentiates its forward ops"
    )
    assert culprit["definition"].endswith(f"forward_wrong.py:{line_of(path, 'def square(x):')}")
    # Forward mode gives x w u where the truth is 2 x w u: half the numeric projection.
    assert culprit["analytic"] == pytest.approx(culprit["numeric"] / 2, rel=1e-7)


def test_kinks_and_surrogates_do_not_fail_forward_mode():
    """At relu's kink and through a straight-through op both analytic modes
    agree or the pair's own verdict explains the difference: no forward failure."""
    from conftest import fixture

    run = gradcli("check", fixture("diag_fake_quant_args.py"), "--json", "--allow-surrogate")
    assert run.exit_code == 0, run
    assert pairs(run.json())[("x", "output")]["verdict"] == "surrogate"
