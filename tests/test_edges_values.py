"""Issue 10, values, outputs and model code: every bad input gets one `Error:`
line with its exit code, at the user's file:line, and nothing passes that
compared nothing.

Truth: each fixture's docstring gives its closed form (y = x * n, y = x^3 through
tf.py_function, log|det diag(1, 0)| = -inf, ...); line numbers are read from
the fixture files, never hard-coded.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import fixture, gradcli

INT_AND_FLOAT = fixture("edge_int_and_float.py")


def line_of(path: str, text: str) -> int:
    """The 1-based line of the first line of ``path`` containing ``text``."""
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if text in line:
                return number
    raise AssertionError(f"{text!r} not in {path}")


def where(name: str, text: str) -> str:
    """``tests/models/NAME:LINE`` of the line of fixture ``name`` holding ``text``."""
    return f"tests/models/{name}:{line_of(fixture(name), text)}"


def error_line(run, exit_code: int) -> str:
    """The run ended with ``exit_code`` and exactly one ``Error:`` line on stderr."""
    assert run.exit_code == exit_code, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), run
    assert "Traceback" not in run.stdout + run.stderr, run
    return lines[0][len("Error: "):]


# --- 1. values are type-checked ---------------------------------------------------


@pytest.fixture(scope="module")
def value_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("values")
    arrays = {
        "complex.npy": np.array([1 + 2j, 3 + 0j]),
        "dates.npy": np.array(["2020-01-01", "2021-01-01"], dtype="datetime64[D]"),
        "durations.npy": np.array([1, 2], dtype="timedelta64[s]"),
        "strings.npy": np.array(["a", "b"]),
        "bytes.npy": np.array([b"a", b"b"]),
    }
    for name, array in arrays.items():
        np.save(folder / name, array)
    np.savez(folder / "mixed.npz", real=np.array([1.0, 2.0]), wave=np.array([1j, 2.0]))
    return folder


COMPLEX = (
    "is complex (complex128) where a real value is expected; a complex input takes complex "
    "values, and its parts are set as NAME.real and NAME.imag"
)


@pytest.mark.parametrize(
    "value, message",
    [
        ("@complex.npy", f"--set x {COMPLEX}"),
        ("@mixed.npz:wave", f"--set x {COMPLEX}"),
        ("@dates.npy", "--set x is a datetime64[D] array (dates or durations), not numbers"),
        ("@durations.npy", "--set x is a timedelta64[s] array (dates or durations), not numbers"),
        ("@strings.npy", "--set x is a string array (<U1), not numbers"),
        ("@bytes.npy", "--set x is a string array (|S1), not numbers"),
        ("true", "--set x: booleans are not numbers (float64 expected)"),
        ("[1.5, true]", "--set x: '[1.5, true]' mixes booleans and numbers"),
        ('"1.5"', "--set x: '\"1.5\"' is not numeric"),
    ],
)
def test_values_that_are_not_real_numbers_are_usage_errors(value_files, value, message):
    if value.startswith("@"):
        value = "@" + str(value_files / value[1:])
    run = gradcli("forward", INT_AND_FLOAT, "--set", f"x={value}")
    assert error_line(run, 2) == message
    assert run.stdout == ""


def test_a_value_that_overflows_a_float32_input_is_refused_not_made_inf():
    run = gradcli("forward", fixture("edge_float32_input.py"), "--set", "x=[1, 1e300]")
    assert error_line(run, 2) == "--set x: 1e+300 overflows float32 (float32 expected)"


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("n=1.5", "--set n: 1.5 is not a whole number (int64 expected)"),
        ("n=[2.5]", "--set n has shape [1], expected [] (or a scalar)"),
        ("n=true", "--set n: booleans are not integers (int64 expected)"),
        ("n=1e30", "--set n: 1e+30 is outside [-9223372036854775808, 9223372036854775807] (int64 expected)"),
        ("flag=1", "--set flag: give true or false (bool expected)"),
    ],
)
def test_integer_and_boolean_inputs_take_only_values_of_their_kind(assignment, message):
    run = gradcli("check", INT_AND_FLOAT, "--set", assignment)
    assert error_line(run, 2) == message


def test_a_whole_float_for_an_integer_input_stays_an_integer_and_is_not_differentiated():
    # y = x * n * flag with n = 3: dy/dx = 3 I, and n (int64) is not in --wrt.
    run = gradcli("forward", INT_AND_FLOAT, "--set", "n=3.0", "--json")
    assert run.exit_code == 0, run
    (output,) = run.result["outputs"]
    assert output["values"] == [3.0, 6.0]
    run = gradcli("jacobian", INT_AND_FLOAT, "--set", "n=3.0", "--json")
    assert run.exit_code == 0, run
    (block,) = run.result["blocks"]
    assert block["input"] == "x"
    np.testing.assert_array_equal(block["values"], 3.0 * np.eye(2))


@pytest.mark.parametrize(
    "command, message",
    [
        (["jvp", "--tangent", "x=true"], "--tangent x: booleans are not numbers (float64 expected)"),
        (["vjp", "--cotangent", "output=[1, false]"], "--cotangent output: '[1, false]' mixes booleans and numbers"),
        (["hessian", "--cotangent", "output=[true, true]"], "--cotangent output: booleans are not numbers (float64 expected)"),
    ],
)
def test_tangents_and_cotangents_follow_the_same_rules(command, message):
    run = gradcli(command[0], INT_AND_FLOAT, *command[1:])
    assert error_line(run, 2) == message


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("edge_input_strings.py", "def inputs", "input 'label' is a string array (<U1), not numbers"),
        ("edge_input_dates.py", "inputs =", "input 'when' is a datetime64[D] array (dates or durations), not numbers"),
        ("edge_input_object.py", "inputs =", "input 'extra' is not numeric (object)"),
        ("edge_input_tf_strings.py", "inputs =", "input 's' is a string array (string), not numbers"),
    ],
)
def test_model_file_inputs_that_are_not_real_numbers_are_model_errors_at_their_line(name, text, message):
    for command in ("check", "forward"):
        run = gradcli(command, fixture(name))
        assert error_line(run, 3) == f"{where(name, text)}: {message}"


# --- 2. outputs of every kind, located in the user's file ----------------------------------


@pytest.mark.parametrize(
    "name, message",
    [
        ("edge_returns_none.py", "the model returned None; return a tensor, a tuple of tensors "
         "or a dict of name -> tensor"),
        ("edge_ragged_output.py", "output 'rows' is a tf.RaggedTensor; return its .to_tensor() instead"),
    ],
)
@pytest.mark.parametrize("command", ["check", "forward", "jacobian"])
def test_outputs_that_are_not_dense_tensors_are_named_at_the_model_function(command, name, message):
    run = gradcli(command, fixture(name))
    assert error_line(run, 3) == f"{where(name, 'def model')}: {message}"


def test_an_inputs_key_the_model_does_not_take_is_named_at_both_definitions():
    name = "edge_unknown_input_key.py"
    run = gradcli("check", fixture(name))
    assert error_line(run, 3) == (
        f"{where(name, 'inputs =')}: `inputs` gives 'scale', which the model function "
        f"({where(name, 'def model')}) does not take (it takes: x)"
    )


def test_a_parameter_inputs_does_not_give_is_named_at_the_model_function():
    name = "edge_missing_parameter.py"
    run = gradcli("vjp", fixture(name))
    assert error_line(run, 3) == (
        f"{where(name, 'def model')}: the model function needs 'w', which `inputs` "
        f"({where(name, 'inputs =')}) does not give (it gives: x)"
    )


def test_inputs_function_without_the_generator_parameter():
    name = "edge_inputs_without_rng.py"
    run = gradcli("check", fixture(name))
    assert error_line(run, 3) == (
        f"{where(name, 'def inputs')}: `inputs` must take one argument, a "
        "numpy.random.Generator (def inputs(rng): ...)"
    )


def test_forward_shows_both_parts_of_a_complex_output():
    # x * (1 + 2i) at x = [1, -3]
    run = gradcli("forward", fixture("edge_complex_output.py"), "--json")
    assert run.exit_code == 0 and run.stderr == "", run
    (output,) = run.result["outputs"]
    assert output["dtype"] == "complex128" and output["summary"] is None
    assert output["values"] == [{"real": 1.0, "imag": 2.0}, {"real": -3.0, "imag": -6.0}]
    text = gradcli("forward", fixture("edge_complex_output.py"))
    assert text.exit_code == 0 and "[ 1.+2.j -3.-6.j]" in text.stdout, text


def test_a_string_output_is_shown_by_forward_and_skipped_by_check():
    path = fixture("edge_string_output.py")
    run = gradcli("forward", path, "--json")
    assert run.exit_code == 0, run
    outputs = {o["name"]: o for o in run.result["outputs"]}
    assert outputs["label"]["dtype"] == "string" and outputs["label"]["values"] == ["1.0", "2.0"]
    assert outputs["loss"]["values"] == 5.0
    run = gradcli("check", path, "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    assert [(p["input"], p["output"], p["verdict"]) for p in model["pairs"]] == [("x", "loss", "pass")]
    assert "outputs label are not floating-point or have no elements: not checked" in model["notes"]
    run = gradcli("vjp", path, "--json")  # d loss / dx = 2x
    assert [g["values"] for g in run.result["gradients"]] == [[2.0, 4.0]]


# --- 3. empty inputs, tf.py_function, BaseException ------------------------------------


@pytest.mark.parametrize("command", ["check", "jacobian", "hessian", "vjp"])
def test_an_input_with_no_elements_is_nothing_to_differentiate(command):
    run = gradcli(command, fixture("edge_empty_input.py"))
    assert error_line(run, 3) == (
        "tests/models/edge_empty_input.py: nothing to differentiate: every floating input has "
        "no elements (x shape [0])"
    )


def test_empty_inputs_and_outputs_beside_full_ones_are_left_out_not_passed():
    path = fixture("edge_empty_beside_full.py")
    run = gradcli("check", path, "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    assert [(p["input"], p["output"], p["verdict"]) for p in model["pairs"]] == [("w", "y", "pass")]
    assert "e: no elements (shape [0]), not differentiated" in model["notes"]
    assert "outputs none are not floating-point or have no elements: not checked" in model["notes"]
    run = gradcli("jacobian", path, "--json")  # dy/dw = I
    (block,) = run.result["blocks"]
    np.testing.assert_array_equal(block["values"], np.eye(2))
    run = gradcli("check", path, "--wrt", "e")
    assert error_line(run, 2) == "--wrt: input 'e' has no elements (shape [0]): nothing to differentiate"


def test_a_py_function_model_is_checked_and_its_jacobian_is_exact():
    path = fixture("edge_py_function.py")
    x = np.array([0.5, 1.0, 2.0])
    run = gradcli("check", path, "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    (pair,) = model["pairs"]
    assert pair["verdict"] == "pass" and pair["compared"] == 9
    run = gradcli("jacobian", path, "--json")
    assert run.exit_code == 0, run
    (block,) = run.result["blocks"]
    np.testing.assert_allclose(block["values"], np.diag(3 * x**2), rtol=1e-15)
    assert (
        "TensorFlow could not vectorise this gradient (e.g. a tf.py_function): the Jacobian "
        "rows were computed one eager VJP at a time"
    ) in run.result["notes"]


def test_generator_exit_from_the_model_is_a_model_error_at_its_line():
    name = "edge_generator_exit.py"
    for command in ("check", "forward"):
        run = gradcli(command, fixture(name))
        assert error_line(run, 3) == (
            f"{where(name, 'raise GeneratorExit')}: forward pass raised GeneratorExit: model gave up"
        )


@pytest.mark.parametrize(
    "command",
    [["check"], ["vjp"], ["jvp", "--tangent", "x=1"], ["jacobian"], ["hessian", "--cotangent", "output=[1, 1]"]],
)
@pytest.mark.parametrize(
    "name, text, raised",
    [
        ("edge_late_exit.py", "        sys.exit(0)", "SystemExit: 0"),
        ("edge_late_base_exception.py", "raise Abandon", "Abandon: third call"),
        ("edge_weights_late_exit.py", "        sys.exit(0)", "SystemExit: 0"),
    ],
)
def test_a_model_that_exits_or_raises_a_base_exception_mid_analysis_is_exit_3(command, name, text, raised):
    """A late sys.exit(0) used to end the run with exit 0 and no report."""
    run = gradcli(command[0], fixture(name), *command[1:])
    assert error_line(run, 3) == f"{where(name, text)}: forward pass raised {raised}"


def test_a_base_exception_while_importing_is_a_model_error_at_its_line():
    name = "edge_base_exception.py"
    run = gradcli("check", fixture(name), "--json")
    assert error_line(run, 3) == (
        f"{where(name, 'raise Abandon')}: Abandon while importing the model file: not today"
    )
    assert run.json()["exit_code"] == 3


# --- 4. no gradient at all -----------------------------------------------------------

NO_GRADIENT = (
    "tests/models/edge_numpy_no_gradient.py: TensorFlow sees no gradient: no output (output) "
    "depends on x through TensorFlow operations (computed in numpy or another library, or cut "
    "by tf.stop_gradient or an integer cast?)"
)


@pytest.mark.parametrize(
    "command, hint",
    [
        (["check"], ""),
        (["hessian", "--expect", "convex"], ""),
        (["vjp"], "; use --numeric for finite differences only"),
        (["jvp", "--tangent", "x=[1, 0]"], "; use --numeric for finite differences only"),
        (["jacobian"], "; use --numeric for finite differences only"),
    ],
)
def test_no_gradient_at_all_is_exit_3_in_every_command(command, hint):
    run = gradcli(command[0], fixture("edge_numpy_no_gradient.py"), *command[1:])
    assert error_line(run, 3) == NO_GRADIENT + hint


def test_numeric_still_differentiates_a_numpy_model():
    # d/dx sum(x^2) = 2x = [2, 4]
    run = gradcli("vjp", fixture("edge_numpy_no_gradient.py"), "--numeric", "--json")
    assert run.exit_code == 0, run
    (grad,) = run.result["gradients"]
    np.testing.assert_allclose(grad["values"], [2.0, 4.0], rtol=1e-8)


def test_logdet_of_a_numpy_flow_is_exit_3():
    run = gradcli("logdet", fixture("edge_logdet_numpy.py"))
    assert error_line(run, 3) == NO_GRADIENT.replace("edge_numpy_no_gradient", "edge_logdet_numpy")


# --- 5. logdet: nothing non-finite passes ----------------------------------------------


def test_logdet_with_a_singular_jacobian_never_passes():
    # J = diag(1, 0): log|det J| = -inf at every example; 123 is declared
    run = gradcli("logdet", fixture("edge_logdet_singular.py"), "--json")
    assert run.exit_code == 1, run
    result = run.result
    assert result["n_failing"] == 3
    assert all(e["logabsdet"] == "-inf" and e["sign"] == 0.0 and not e["ok"] for e in result["examples"])
    assert (
        "the Jacobian is singular at examples 0, 1, 2 (log|det J| = -inf): those examples fail, "
        "whatever is declared"
    ) in result["notes"]


def test_logdet_with_a_non_finite_declared_value_never_passes():
    # J = 2 I on R^2: log|det J| = 2 log 2; inf and nan are declared
    run = gradcli("logdet", fixture("edge_logdet_nonfinite.py"), "--json")
    assert run.exit_code == 1, run
    examples = {e["index"]: e for e in run.result["examples"]}
    assert examples[0]["declared"] == "inf" and examples[1]["declared"] == "nan"
    assert all(not e["ok"] for e in examples.values())
    np.testing.assert_allclose([e["logabsdet"] for e in examples.values()], 2 * np.log(2.0), rtol=1e-14)


def test_logdet_jacobian_returning_none_is_named_at_its_definition():
    name = "edge_logdet_returns_none.py"
    run = gradcli("logdet", fixture(name))
    assert error_line(run, 3) == (
        f"{where(name, 'def log_det_jacobian')}: log_det_jacobian returned None; return a tensor, "
        "a tuple of tensors or a dict of name -> tensor"
    )


def test_an_input_cut_by_an_op_without_gradient_is_disconnected_not_unseen():
    path = fixture("edge_only_input_cut_by_op.py")
    run = gradcli("check", path, "--json")
    assert run.exit_code == 1, run
    (model,) = run.json()["result"]["models"]
    (pair,) = model["pairs"]
    assert pair["verdict"] == "disconnected" and pair["failed"]
    line = next(i for i, text in enumerate(open(path), 1) if "betainc(" in text)
    assert any(s["op_type"] == "Betainc" and s["location"].endswith(f"edge_only_input_cut_by_op.py:{line}")
               for s in pair["sites"]), pair["sites"]


def test_inputs_of_two_dtypes_are_differenced_in_their_own_dtypes():
    """Each float dtype is one group of finite differences: a float32 weight is
    never handed to the model as float64 (an op dtype error before)."""
    run = gradcli("check", fixture("mixed_dtype_inputs.py"), "--json")
    assert run.exit_code == 0, run
    (model,) = run.json()["result"]["models"]
    by_input = {p["input"]: p for p in model["pairs"]}
    assert set(by_input) == {"x", "w"} and all(p["verdict"] == "pass" for p in by_input.values())
    x, w = np.array([0.3, -1.2, 0.7]), np.array([1.5, -0.5, 2.0])
    worst = by_input["w"]["worst"]
    assert worst["analytic"] == pytest.approx(np.tanh(x)[worst["input_index"][0]], rel=1e-6)
