"""The Python API as torch and jax users call it (issue 30): inputs as the
second positional argument, one exception for a bad argument in every
function (worded with the keyword, never a flag), a public ``UnknownKeyword``,
a clean namespace, errors that point at the user's own lines, and repeated
calls that do not retrace.

Numbers are checked against closed forms: x**2 has the VJP 2 x c and the
Jacobian diag(2 x); x * y**2 the blocks diag(y**2) and diag(2 x y).
"""

from __future__ import annotations

import inspect
import logging
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import gradcli
from gradcli.errors import ModelError, UsageError
from tests.conftest import ROOT, line_of, sample

FUNCTIONS = ("check", "forward", "vjp", "jvp", "jacobian", "hessian", "logdet")


def square(x):
    return x * x


def product(x, y):
    return x * y**2


X = np.array([0.5, -1.5])
Y = np.array([2.0, 3.0])


# --- bad arguments: one exception, worded with the keyword --------------------------


def _call(function, **keywords):
    """``gradcli.<function>`` of x**2 at X, with the arguments it needs besides."""
    import tensorflow as tf

    if function == "jvp":
        return gradcli.jvp(square, (X,), {"x": [1.0, 0.0]}, **keywords)
    if function == "hessian":
        return gradcli.hessian(lambda x: tf.reduce_sum(x**2), (X,), **keywords)
    return getattr(gradcli, function)(square, (X,), **keywords)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_an_unknown_wrt_raises_in_every_function_worded_with_the_keyword(function):
    with pytest.raises(UsageError) as info:
        _call(function, wrt="y")
    assert str(info.value) == "wrt: unknown input 'y' (known: x)"
    assert type(info.value) is gradcli.UsageError


def test_check_raises_a_bad_argument_instead_of_returning_an_error_row():
    # before: <CheckResult: 1 model, 0 passed, exit 2> with "--wrt: ..." in its row
    with pytest.raises(UsageError, match=r"^wrt: unknown input 'y' \(known: x\)$"):
        gradcli.check(square, inputs=(X,), wrt="y")
    with pytest.raises(UsageError, match=r"^wrt: unknown input 'z' \(known: a, b\)$"):
        gradcli.check(sample("two_by_two.py"), wrt="a,z")  # a model file's row, raised too


def test_values_name_the_keyword_the_call_used_never_the_flag():
    with pytest.raises(UsageError) as info:
        gradcli.check(square, (X,), set={"x": [1.0, 2.0, 3.0]})
    assert str(info.value) == "set x has shape [3], expected [2] (or a scalar)"
    with pytest.raises(UsageError) as info:
        gradcli.forward(square, (X,), set={"z": 1.0})
    assert str(info.value) == "unknown input for set 'z' (known: x)"
    with pytest.raises(UsageError) as info:
        gradcli.vjp(square, (X,), {"z": 1.0})
    assert str(info.value) == "unknown output for cotangents 'z' (known: output)"
    with pytest.raises(UsageError) as info:
        gradcli.jvp(square, (X,), tangent={"x": [1.0, 2.0, 3.0]})
    assert str(info.value) == "tangent x has shape [3], expected [2] (or a scalar)"
    with pytest.raises(UsageError) as info:
        gradcli.jacobian(square, (X,), of="z")
    assert str(info.value) == "unknown output for of 'z' (known: output)"
    with pytest.raises(UsageError) as info:
        gradcli.jacobian(square, (X,), mode="sideways")
    assert str(info.value) == "mode must be auto, reverse or forward, got 'sideways'"


# --- inputs as the second positional argument ------------------------------------------


@pytest.mark.parametrize("function", [*FUNCTIONS, "assert_gradients_ok"])
def test_inputs_is_the_second_parameter_of_every_function(function):
    from gradcli.testing import assert_gradients_ok

    call = assert_gradients_ok if function == "assert_gradients_ok" else getattr(gradcli, function)
    parameters = list(inspect.signature(call).parameters.values())
    assert [p.name for p in parameters[:2]] == ["model", "inputs"]
    assert parameters[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # not keyword-only


def test_positional_inputs_as_torch_and_jax_take_them():
    import tensorflow as tf
    from gradcli.testing import assert_gradients_ok

    assert repr(gradcli.check(square, (X,))) == "<CheckResult: 1 model, 1 passed, exit 0>"
    assert assert_gradients_ok(tf.sin, ([0.5, 1.5],)).ok
    blocks = gradcli.jacobian(product, (X, Y)).arrays()
    np.testing.assert_allclose(blocks["output/y"], np.diag(2 * X * Y), rtol=1e-15)
    np.testing.assert_array_equal(gradcli.forward(square, (X,)).arrays()["output"], X * X)
    c = np.array([2.0, 3.0])
    np.testing.assert_allclose(gradcli.vjp(square, (X,), {"output": c}).arrays()["x"], 2 * X * c, rtol=1e-15)
    np.testing.assert_allclose(
        gradcli.jvp(product, (X, Y), {"y": [1.0, 1.0]}).arrays()["output"], 2 * X * Y, rtol=1e-15
    )
    hessian = gradcli.hessian(lambda x: tf.reduce_sum(x**2), (X,), method="dense").hessian
    np.testing.assert_allclose(hessian, 2 * np.eye(2), atol=1e-12)


def test_the_earlier_second_arguments_still_work():
    # vjp(model, cotangents, inputs=...), and a model file (its own inputs: x = [1, 2])
    c = {"output": [2.0, 3.0]}
    earlier = gradcli.vjp(square, c, inputs=(X,)).arrays()["x"]
    np.testing.assert_array_equal(earlier, gradcli.vjp(square, (X,), c).arrays()["x"])
    np.testing.assert_allclose(gradcli.vjp(sample("square.py"), c).arrays()["x"], [4.0, 12.0], rtol=1e-15)
    np.testing.assert_allclose(
        gradcli.jvp(square, {"x": [1.0, 0.0]}, inputs=(X,)).arrays()["output"], [2 * X[0], 0.0], rtol=1e-15
    )
    assert list(gradcli.jacobian(sample("two_by_two.py"), "u").arrays()) == ["u/a", "u/b"]
    with pytest.raises(TypeError, match=r"^vjp\(\) got multiple values for argument 'cotangents'$"):
        gradcli.vjp(square, c, inputs=(X,), cotangents=c)


# --- the unknown keyword's exception is public -------------------------------------------


def test_an_unknown_keyword_is_a_public_usage_error_and_type_error():
    with pytest.raises(gradcli.UnknownKeyword) as info:
        gradcli.jacobian(square, (X,), rng_sed=1)
    error = info.value
    assert type(error) is gradcli.UnknownKeyword is gradcli.errors.UnknownKeyword
    assert type(error).__module__ == "gradcli.errors" and type(error).__qualname__ == "UnknownKeyword"
    assert isinstance(error, gradcli.UsageError) and isinstance(error, TypeError)
    assert str(error).startswith("gradcli.jacobian() got an unknown keyword rng_sed (did you mean rng_seed?); it takes: ")
    assert type(pickle.loads(pickle.dumps(error))) is gradcli.UnknownKeyword  # a worker's pipe keeps it


# --- the namespace, and errors at the user's lines ---------------------------------------


def test_dir_lists_the_public_api_only():
    assert dir(gradcli) == sorted([
        "KEYWORDS", "ModelError", "UnknownKeyword", "UsageError", "__version__", "check", "errors",
        "forward", "hessian", "jacobian", "jvp", "logdet", "options", "results", "testing", "vjp",
    ])
    assert not {"annotations", "functools", "os", "sys", "types"} & set(vars(gradcli))
    assert gradcli.results.CheckResult.__module__ == "gradcli.results.check"  # listed, so it resolves


def test_an_input_error_names_a_custom_gradient_function_at_its_own_line():
    import tensorflow as tf

    @tf.custom_gradient
    def custom_square(x):
        return x * x, lambda upstream: upstream * 2.0 * x

    with pytest.raises(ModelError) as info:
        gradcli.forward(custom_square, inputs={"y": [1.0]})
    here = os.path.relpath(__file__)
    line = line_of(__file__, "    def custom_square(x):")
    assert str(info.value) == (
        f"custom_square: `inputs` gives 'y', which the model function ({here}:{line}) does not take "
        "(it takes: x)"
    )


def test_a_failing_assert_gradients_ok_shows_the_test_line_not_gradcli(tmp_path):
    test = tmp_path / "test_wrong.py"
    test.write_text(
        "import tensorflow as tf\n"
        "from gradcli.testing import assert_gradients_ok\n\n\n"
        "@tf.custom_gradient\n"
        "def wrong_square(x):\n"
        "    return x * x, lambda upstream: upstream * 2.5 * x\n\n\n"
        "def test_it():\n"
        "    assert_gradients_ok(wrong_square, ([0.5, 1.5],), mode='full')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", str(test)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    shown = done.stdout
    assert done.returncode == 1, shown + done.stderr
    assert ">       assert_gradients_ok(wrong_square, ([0.5, 1.5],), mode='full')" in shown, shown
    assert "E       AssertionError: gradient check failed" in shown, shown
    assert "testing.py" not in shown and "raise AssertionError" not in shown, shown


# --- repeated calls ------------------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_ten_repeated_checks_do_not_retrace_and_give_the_same_result():
    import tensorflow as tf

    def wave(x):
        return tf.sin(x) * x

    x = np.linspace(0.1, 0.6, 6)
    records = _Records()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(records)
    try:
        results = [gradcli.check(wave, (x,), mode="full") for _ in range(10)]
    finally:
        logger.removeHandler(records)
    assert not [m for m in records.messages if "retracing" in m], records.messages
    first = results[0].models[0].pairs[0]
    assert first.verdict == "pass" and all(r.ok for r in results)
    for result in results[1:]:
        pair = result.models[0].pairs[0]
        assert (pair.verdict, pair.max_abs_error, pair.worst) == (first.verdict, first.max_abs_error, first.worst)
