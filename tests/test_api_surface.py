"""The Python API speaks the command line's language: keywords named like the
options, positional inputs as torch's gradcheck and jax's check_grads take
them, results that print as the report, and one error for a missing file.

Numbers are checked against closed forms: f(x, y) = x * y**2 has the
Jacobian blocks diag(y**2) and diag(2 x y); g(x) = x**2 the VJP 2 x c.
"""

from __future__ import annotations

import pytest

import numpy as np

import gradcli
from gradcli.errors import UsageError
from tests.conftest import sample

FUNCTIONS = ("check", "forward", "vjp", "jvp", "jacobian", "hessian", "logdet")


def product(x, y):
    return x * y**2


def square(x):
    return x * x


X = np.array([0.5, -1.5])
Y = np.array([2.0, 3.0])


# --- keywords ----------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_unknown_keyword_names_it_the_nearest_and_every_known_one(function):
    with pytest.raises(UsageError) as info:
        getattr(gradcli, function)(square, inputs=(X,), rng_sed=1)
    message = str(info.value)
    assert message.startswith(f"gradcli.{function}() got an unknown keyword rng_sed (did you mean rng_seed?); it takes: ")
    listed = message.split("it takes: ")[1].split(", ")
    assert listed == sorted(listed) and "rng_seed" in listed and "set" in listed
    assert isinstance(info.value, TypeError)  # as Python's own unknown keyword is


def test_unknown_keywords_list_the_option_spellings():
    with pytest.raises(UsageError) as info:
        gradcli.check(square, inputs=(X,), nativ_dtype=True, zzz=1)
    message = str(info.value)
    assert "unknown keyword nativ_dtype (did you mean native_dtype?) and zzz;" in message
    listed = message.split("it takes: ")[1].split(", ")
    assert {"native_dtype", "xla", "set", "input", "fail_on", "wrt"} <= set(listed)
    # the fields' earlier names still work but are not what the list teaches
    assert not {"float64", "jit_compile", "overrides", "data"} & set(listed)


def test_set_is_the_override():
    # x = [0.5, -1.5] replaced by [1, 2]: f = x y^2 = [4, 18]
    result = gradcli.forward(product, inputs=(X, Y), set={"x": [1.0, 2.0]})
    np.testing.assert_array_equal(result.arrays()["output"], [4.0, 18.0])


@pytest.mark.parametrize("earlier, now", [
    ("overrides", "set"), ("float64", "native_dtype"), ("jit_compile", "xla"), ("data", "input"),
])
def test_the_earlier_field_names_are_no_keywords(earlier, now):
    """One name per option (issue 29): the options fields are named as the
    keywords, and the names they had before are unknown keywords."""
    function = gradcli.check if earlier == "jit_compile" else gradcli.forward
    with pytest.raises(gradcli.UnknownKeyword, match=rf"unknown keyword {earlier}\b.*; it takes: .*\b{now}\b"):
        function(square, inputs=(X,), **{earlier: {}})


def test_set_reads_values_as_the_command_line_does(tmp_path):
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0]))
    from_file = gradcli.forward(product, inputs=(X, Y), set={"x": f"@{tmp_path / 'x.npy'}"})
    from_json = gradcli.forward(product, inputs=(X, Y), set=["y=[1, 1]"])  # NAME=VALUE strings
    np.testing.assert_array_equal(from_file.arrays()["output"], [4.0, 18.0])
    np.testing.assert_array_equal(from_json.arrays()["output"], X)


def test_native_dtype():
    x32 = np.array([0.5, 1.5], dtype=np.float32)
    promoted = gradcli.forward(square, inputs=(x32,))
    native = gradcli.forward(square, inputs=(x32,), native_dtype=True)
    assert [promoted.dtype, native.dtype] == ["float64", "float32"]
    assert native.arrays()["output"].dtype == np.float32
    np.testing.assert_array_equal(native.arrays()["output"], np.float32([0.25, 2.25]))


def test_a_keyword_and_its_singular_together_is_an_error():
    with pytest.raises(UsageError, match=r"got both cotangent= and cotangents="):
        gradcli.vjp(square, {"output": [1.0, 1.0]}, inputs=(X,), cotangent={"output": [1.0, 1.0]})


def test_bad_values_name_the_keyword_the_call_used():
    with pytest.raises(UsageError, match=r"^native_dtype must be true or false, got 1$"):
        gradcli.forward(square, inputs=(X,), native_dtype=1)
    with pytest.raises(UsageError, match=r"^xla must be true or false, got 'no'$"):
        gradcli.check(square, inputs=(X,), xla="no")
    with pytest.raises(UsageError, match=r"^set must be a dict name -> value, got int$"):
        gradcli.forward(square, inputs=(X,), set=3)


@pytest.mark.parametrize("keyword", ["cotangents", "cotangent"])
def test_vjp_cotangents_singular_or_plural(keyword):
    result = gradcli.vjp(square, inputs=(X,), **{keyword: {"output": [2.0, 3.0]}})
    np.testing.assert_allclose(result.arrays()["x"], 2 * X * [2.0, 3.0], rtol=1e-15)
    positional = gradcli.vjp(square, {"output": [2.0, 3.0]}, inputs=(X,))
    np.testing.assert_array_equal(positional.arrays()["x"], result.arrays()["x"])


def test_hessian_cotangent_singular():
    # the scalar is <c, x^2> = x0^2 + 3 x1^2: H = diag(2, 6)
    result = gradcli.hessian(square, inputs=(X,), cotangent={"output": [1.0, 3.0]}, method="dense")
    np.testing.assert_allclose(result.hessian, np.diag([2.0, 6.0]), atol=1e-12)


def test_jvp_tangent_singular_and_names_as_a_string():
    result = gradcli.jvp(product, tangent={"y": [1.0, 1.0]}, inputs=(X, Y), wrt="x,y")
    np.testing.assert_allclose(result.arrays()["output"], 2 * X * Y, rtol=1e-15)
    with pytest.raises(UsageError, match=r"^tangents needs at least one input's direction"):
        gradcli.jvp(product, inputs=(X, Y))


def test_input_is_the_data_of_a_saved_keras_model(tmp_path):
    import keras

    layer = keras.Sequential([keras.Input((2,), name="features"), keras.layers.Dense(1)])
    path = str(tmp_path / "dense.keras")
    layer.save(path)
    kernel, bias = (np.asarray(w, dtype=np.float64) for w in layer.get_weights())
    data = np.array([[1.0, 2.0], [-0.5, 0.25]])
    result = gradcli.forward(path, input={"features": data})
    (output,) = result.arrays().values()
    np.testing.assert_allclose(output, data @ kernel + bias, rtol=1e-12)


def test_check_options_by_their_option_names():
    # fail_on as the command line's comma-separated words; zero gradient of sign -> fails
    import tensorflow as tf

    passes = gradcli.check(tf.sign, inputs=([0.5, -1.0],), mode="full")
    fails = gradcli.check(tf.sign, inputs=([0.5, -1.0],), mode="full", fail_on="zero,kink")
    assert passes.ok and not fails.ok
    assert fails.models[0].pairs[0].verdict == "zero"


# --- positional inputs ---------------------------------------------------------------


def test_tuple_inputs_follow_the_parameters():
    result = gradcli.jacobian(product, inputs=(X, Y))
    blocks = result.arrays()
    np.testing.assert_allclose(blocks["output/x"], np.diag(Y**2), rtol=1e-15)
    np.testing.assert_allclose(blocks["output/y"], np.diag(2 * X * Y), rtol=1e-15)
    listed = gradcli.jacobian(product, inputs=[X, Y]).arrays()
    np.testing.assert_array_equal(listed["output/y"], blocks["output/y"])


def test_one_array_is_the_one_argument():
    import tensorflow as tf

    for given in (X, tf.constant(X), np.float64(0.5)):
        result = gradcli.vjp(square, inputs=given)
        np.testing.assert_allclose(result.arrays()["x"], 2 * np.asarray(given), rtol=1e-15)


def test_tuple_inputs_check_a_custom_gradient_passed_positionally():
    """The names come from the signature, and the values go back positionally,
    so a tf.custom_gradient's own gradient is what is checked: a wrong one fails."""
    import tensorflow as tf

    @tf.custom_gradient
    def wrong_square(x):
        return x * x, lambda upstream: upstream * 2.1 * x

    @tf.custom_gradient
    def right_square(x):
        return x * x, lambda upstream: upstream * 2.0 * x

    assert gradcli.check(right_square, inputs=(X,), mode="full").ok
    failed = gradcli.check(wrong_square, inputs=(X,), mode="full")
    (pair,) = failed.models[0].pairs
    assert pair.verdict == "mismatch" and pair.input == "x"
    assert pair.worst.analytic == pytest.approx(2.1 * X[abs(X).argmax()], rel=1e-12)


def test_defaults_and_varargs():
    def scaled(a, b, scale=3.0):
        return scale * a * b

    result = gradcli.jacobian(scaled, inputs=(X, Y))  # scale keeps its default
    np.testing.assert_allclose(result.arrays()["output/a"], np.diag(3.0 * Y), rtol=1e-15)

    def star(*parts):
        return parts[0] * parts[1]

    result = gradcli.jacobian(star, inputs=(X, Y))
    np.testing.assert_allclose(result.arrays()["output/parts_1"], np.diag(X), rtol=1e-15)


def test_a_callable_inputs_may_return_a_tuple():
    result = gradcli.forward(product, inputs=lambda rng: (rng.standard_normal(2), np.ones(2)))
    expected = np.random.default_rng(0).standard_normal(2)  # rng_seed 0 seeds the Generator
    np.testing.assert_allclose(result.arrays()["output"], expected, rtol=1e-15)


def test_wrong_number_of_positional_inputs():
    with pytest.raises(UsageError) as info:
        gradcli.forward(product, inputs=(X,))
    assert str(info.value) == (
        "gradcli.forward(): inputs gives 1 value, the model also needs y (parameters: x, y): "
        "one value per parameter, in order"
    )
    with pytest.raises(UsageError) as info:
        gradcli.check(square, inputs=[0.5, 1.5])
    assert str(info.value) == (
        "gradcli.check(): inputs gives 2 values, the model takes 1 positional parameter (x): one "
        "value per parameter, in order (for one array, write inputs=(array,) or a dict)"
    )


def test_a_keras_model_takes_its_inputs_by_position():
    import keras

    x = keras.Input((2,), name="a")
    y = keras.Input((2,), name="b")
    layer = keras.Model([x, y], keras.layers.Multiply()([x, y]))
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    result = gradcli.jacobian(layer, inputs=(a, b), wrt="a")
    np.testing.assert_allclose(result.arrays()["output/a"].reshape(2, 2), np.diag(b[0]), rtol=1e-15)


# --- results -----------------------------------------------------------------------------


def test_a_check_result_prints_as_the_report():
    result = gradcli.check(sample("buggy_custom_gradient.py"))
    assert bool(result) is False and result.ok is False
    assert repr(result) == "<CheckResult: 1 model, 0 passed, exit 1>"
    text = str(result)
    assert "\x1b[" not in text
    assert "  FAIL x -> output: mismatch: the analytic derivative disagrees with finite differences" in text
    assert text.splitlines()[-1] == "0 of 1 model passed"

    good = gradcli.check(square, inputs=(X,))
    assert bool(good) is True and repr(good) == "<CheckResult: 1 model, 1 passed, exit 0>"
    assert str(good).splitlines()[-1] == "1 of 1 model passed"


def test_every_result_has_a_one_line_repr_and_a_report():
    import tensorflow as tf

    results = {
        "forward": gradcli.forward(square, inputs=(X,)),
        "vjp": gradcli.vjp(square, inputs=(X,)),
        "jvp": gradcli.jvp(square, {"x": [1.0, 0.0]}, inputs=(X,)),
        "jacobian": gradcli.jacobian(square, inputs=(X,)),
        "hessian": gradcli.hessian(lambda x: tf.reduce_sum(x**2), inputs=(X,), expect="concave"),
        "logdet": gradcli.logdet(sample("realnvp_flow.py")),
    }
    assert repr(results["forward"]) == "<ForwardResult: square, 1 output, exit 0>"
    assert repr(results["vjp"]) == "<VjpResult: square, 1 gradient, exit 0>"
    assert repr(results["jacobian"]) == "<JacobianResult: square, 1 block (reverse), exit 0>"
    # sum x^2 has H = 2 I: convex, so expect="concave" fails (exit 1)
    assert repr(results["hessian"]) == (
        "<HessianResult: <lambda>, 2 parameters, positive definite, concave not met, exit 1>"
    )
    assert not results["hessian"] and results["hessian"].spectrum.eigenvalues == pytest.approx([2.0, 2.0])
    assert repr(results["logdet"]).startswith("<LogdetResult: ") and repr(results["logdet"]).endswith(", exit 0>")
    for name, result in results.items():
        assert "\n" not in repr(result), name
        assert bool(result) is result.ok, name
        assert str(result).strip() and "\x1b[" not in str(result), name
    # the VJP of x^2 with ones is 2 x = [1, -3], shown in the report's values column
    assert "[ 1. -3.]" in str(results["vjp"])


def test_results_do_not_import_the_renderers():
    import subprocess
    import sys

    code = (
        "import sys, gradcli.results\n"
        "print(sorted(m for m in sys.modules if m.startswith(('gradcli.render', 'rich', 'tensorflow'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# --- missing files ---------------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_missing_file_raises_the_same_error_in_every_function(function, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call = getattr(gradcli, function)
    with pytest.raises(UsageError) as info:
        call("models/net.py")
    assert str(info.value) == "no such model file: models/net.py"
    with pytest.raises(UsageError) as info:
        call("models/")
    assert str(info.value) == "no such folder: models/"
    with pytest.raises(UsageError) as info:
        call("models")  # no suffix: a folder, as on the command line
    assert str(info.value) == "no such folder: models"
    with pytest.raises(UsageError) as info:
        call(tmp_path / "net.keras")  # a path object, and a saved model's suffix
    assert str(info.value) == f"no such model file: {tmp_path / 'net.keras'}"


def test_a_missing_file_in_a_batch_raises_before_anything_runs():
    from gradcli.testing import assert_gradients_ok

    with pytest.raises(UsageError, match=r"^no such model file: nowhere\.py$"):
        gradcli.check([sample("square.py"), "nowhere.py"])
    with pytest.raises(UsageError, match=r"^no such model file: nowhere\.py$"):
        assert_gradients_ok([sample("square.py"), "nowhere.py"])
    with pytest.raises(UsageError, match=r"unknown keyword rtoll \(did you mean rtol\?\)"):
        assert_gradients_ok(sample("square.py"), rtoll=1)
