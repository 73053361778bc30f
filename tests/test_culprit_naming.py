"""The code at fault, named for every wrong gradient: gradients of the wrong
shape, TensorFlow op gradients (scatter/stitch overwrites, a gradient that
raises), ``gradient_override_map`` overrides, second derivatives, Keras layers.

Truth is independent of gradcli: closed forms written in the fixtures'
docstrings (evaluated here with numpy in float64), and source lines read from
the fixture files.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import check_json, error_line, fixture, gradcli, line_of as source_line, pairs


def checked(name: str, *options: str):
    """``check_json`` of the fixture ``name``."""
    return check_json(fixture(name), *options)


def line_of(name: str, text: str) -> int:
    return source_line(fixture(name), text)


def at(name: str, text: str) -> str:
    return f"tests/models/{name}:{line_of(name, text)}"


def elements(pair):
    """Every element the report lists (failing ones, and the worst)."""
    return list(pair["failing"]) + ([pair["worst"]] if pair["worst"] else [])


# -- a gradient of the wrong shape -----------------------------------------------


def sin_affine_truth():
    x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    scale, shift = np.array([0.5, -1.5, 2.0]), np.array([0.1, 0.2, -0.3])
    c = np.cos(x * scale + shift)
    return {"x": c * scale, "shift": c.sum(axis=0), "scale": (c * x).sum(axis=0)}


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_scalar_gradient_for_a_per_channel_parameter_is_a_mismatch_and_the_rest_is_checked(mode):
    name = "blame_wrong_shape.py"
    run, doc = checked(name, "--mode", mode)
    assert run.exit_code == 1, run
    found = pairs(doc)
    scale = found[("scale", "output")]
    assert scale["verdict"] == "mismatch" and scale["failed"]
    assert "has shape ()" in scale["explanation"] and "scale has shape (3,)" in scale["explanation"]
    culprit = scale["culprit"]
    assert culprit["site"]["description"] == (
        "tf.custom_gradient affine returns a gradient of shape () for argument 'scale' of shape (3,)"
    )
    assert culprit["definition"] == at(name, "def affine(")
    assert culprit["site"]["location"] == at(name, "affine(x, scale, shift)))")
    # The correct inputs keep their verdicts, and their numbers are the closed form's.
    truth = sin_affine_truth()
    for input_name in ("x", "shift"):
        pair = found[(input_name, "output")]
        assert pair["verdict"] == "pass", pair
        if mode == "full":
            worst = pair["worst"]
            assert worst["numeric"] == pytest.approx(truth[input_name][tuple(worst["input_index"])], rel=1e-8)
            assert worst["analytic"] == pytest.approx(truth[input_name][tuple(worst["input_index"])], rel=1e-8)


def test_a_broadcastable_gradient_shape_that_travels_through_other_ops_is_named_at_its_source():
    name = "blame_wrong_shape_deep.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    found = pairs(doc)
    log_g = found[("log_g", "output")]
    assert log_g["verdict"] == "mismatch"
    assert "has shape (1, 3)" in log_g["explanation"] and "log_g has shape (3,)" in log_g["explanation"]
    culprit = log_g["culprit"]
    assert culprit["site"]["description"].startswith("tf.custom_gradient gain returns a gradient of shape (1, 3)")
    assert culprit["definition"] == at(name, "def gain(")
    x = np.array([[0.3, -0.8, 1.1], [0.5, 0.2, -0.4]])
    g = np.exp(np.array([0.1, -0.2, 0.3]))
    truth = g * (1 - np.tanh(x * g) ** 2)
    pair = found[("x", "output")]
    assert pair["verdict"] == "pass"
    worst = pair["worst"]
    assert worst["numeric"] == pytest.approx(truth[tuple(worst["input_index"])], rel=1e-8)


# -- TensorFlow op gradients -------------------------------------------------------


def test_overwritten_scatter_update_is_named_with_its_type_name_and_line():
    name = "blame_scatter_duplicate.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    found = pairs(doc)
    c = np.array([[1.5, -2.0], [0.5, 3.0]])
    t = np.array([0.4, -0.7, 1.2, 0.9])
    w_pair = found[("w", "output")]
    # df/dw = C01 t2 + C10 t1 + C11 t3 (update 0 is overwritten)
    assert w_pair["worst"]["numeric"] == pytest.approx(c[0, 1] * t[2] + c[1, 0] * t[1] + c[1, 1] * t[3], rel=1e-8)
    assert w_pair["verdict"] == "mismatch"
    site = w_pair["culprit"]["site"]
    assert site["op_type"] == "TensorScatterUpdate" and site["op_name"] == "TensorScatterUpdate"
    assert site["location"] == at(name, "tf.tensor_scatter_nd_update(")
    # t[0] is overwritten: its true derivative is 0, never a pass.
    t_pair = found[("t", "output")]
    assert t_pair["failed"] and t_pair["verdict"] != "pass"
    overwritten = [e for e in elements(t_pair) if e["input_index"] == [0]]
    assert overwritten and all(e["numeric"] == pytest.approx(0.0, abs=1e-9) for e in overwritten)


def test_a_wrong_custom_gradient_of_many_elements_is_named_in_float32():
    """The GELU's custom gradient is 0.9 times the right one over 65,536
    elements, checked in float32. Its local check compared against rtol times
    the Cauchy-Schwarz bound |u| |J^T v|, 256 (sqrt of its size) times a
    projection's typical size ||J||_F: the error of a tenth was 4e-4 of that
    bound, the op passed, and no culprit was named (inside a BERT-base layer,
    an op before it was). Against ||J||_F, as the fast check's projections
    are judged, it is convicted; its probe's analytic value is 0.9 times the
    numeric one, as the bug implies."""
    name = "culprit_wide_gelu_float32.py"
    run, doc = check_json(fixture(name), "--native-dtype")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch"
    culprit = pair["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient wrong_gelu", culprit
    assert culprit["definition"].endswith(f"{name}:{source_line(fixture(name), 'def wrong_gelu(x):')}"), culprit
    assert culprit["analytic"] / culprit["numeric"] == pytest.approx(0.9, rel=5e-3), culprit


def graph_culprit(name, input_name):
    """The culprit search of the library on a loaded fixture (float64 tolerance)."""
    from gradcli.model.loading import load_model
    from gradcli.verdicts import compare
    from gradcli.verdicts.culprit import ModelGraph

    model = load_model(fixture(name))
    return ModelGraph(model).culprit(input_name, "output", compare.tolerance("float64"))


def test_overwritten_stitch_slot_is_found_in_the_dynamic_stitch_gradient():
    name = "blame_stitch_duplicate.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    p_pair = pairs(doc)[("p", "output")]
    assert p_pair["failed"] and p_pair["verdict"] != "pass"
    # df/dp = [D0 cos p0, 0]: p1's slot is overwritten by q0.
    lost = [e for e in elements(p_pair) if e["input_index"] == [1]]
    assert lost and lost[0]["numeric"] == pytest.approx(0.0, abs=1e-9)
    assert lost[0]["analytic"] == pytest.approx(0.5 * np.cos(-0.9), rel=1e-8)
    culprit = graph_culprit(name, "p")
    assert culprit.site.op_type == "DynamicStitch"
    assert culprit.site.location == at(name, "merged = tf.dynamic_stitch(")


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_tensorflow_gradient_that_raises_names_its_op_and_line_not_a_neighbour(mode):
    name = "blame_qr_raises.py"
    run = gradcli("check", fixture(name), "--mode", mode)
    assert run.exit_code == 3, run
    line = error_line(run)
    made = at(name, "tf.linalg.qr(")
    assert line.startswith(f"Error: {made}: computing the gradient of op 'Qr' (Qr, made at {made}) raised NotImplementedError")
    assert "AddV2" not in line and "Mul" not in line


def test_a_registered_gradient_that_raises_names_the_op_its_override_and_both_lines():
    name = "blame_override_raises.py"
    run = gradcli("check", fixture(name))
    assert run.exit_code == 3, run
    line = error_line(run)
    assert line.startswith(f"Error: {at(name, 'raise NotImplementedError')}: computing the gradient of op 'Tanh' (Tanh, ")
    assert (
        f"its gradient overridden by registered gradient 'BlameRaisingTanh' "
        f"(raising_tanh_grad at {at(name, 'def raising_tanh_grad(')})" in line
    )
    assert f"made at {at(name, 'bent = tf.tanh(')})" in line
    assert line.endswith("raised NotImplementedError: this tanh gradient is not written yet")


# -- gradient_override_map ------------------------------------------------------------


def test_an_overridden_gradient_is_named_with_its_registered_function():
    name = "blame_override_wrong.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    x, w = np.array([0.4, -1.1, 0.7]), 1.3
    s = 1 / (1 + np.exp(-w * x))
    truth = {"x": 2 * s**2 * (1 - s) * w, "w": np.sum(2 * s**2 * (1 - s) * x)}
    wrong = {"x": 2 * s**2 * w, "w": np.sum(2 * s**2 * x)}  # grad * y in place of grad * y (1 - y)
    for input_name, pair in pairs(doc).items():
        assert pair["verdict"] == "mismatch"
        for e in elements(pair):
            index = tuple(e["input_index"])
            assert e["numeric"] == pytest.approx(np.asarray(truth[input_name[0]])[index], rel=1e-7)
            assert e["analytic"] == pytest.approx(np.asarray(wrong[input_name[0]])[index], rel=1e-7)
        culprit = pair["culprit"]
        assert culprit["site"]["op_type"] == "Sigmoid"
        assert culprit["site"]["location"] == at(name, "s = tf.sigmoid(z)")
        assert (
            "its gradient overridden by registered gradient 'BlameSloppySigmoid' "
            f"(sloppy_sigmoid_grad at {at(name, 'def sloppy_sigmoid_grad(')})"
        ) in culprit["site"]["description"]
        assert culprit["definition"] == at(name, "def sloppy_sigmoid_grad(")


# -- second order ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_second_derivative_names_the_custom_gradient_and_the_routes(mode):
    name = "blame_second_order.py"
    run, doc = checked(name, "--order", "2", "--mode", mode)
    assert run.exit_code == 1, run
    found = pairs(doc)
    assert found[("x", "output")]["verdict"] == "pass"  # the first derivative is right
    second = found[("x", "d(output)/dx")]
    assert second["verdict"] == "mismatch"
    assert "neither forward-over-reverse nor reverse-over-reverse agrees" in second["explanation"]
    culprit = second["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient soft_cube"
    assert culprit["definition"] == at(name, "def soft_cube(")
    assert culprit["analytic"] == 0.0  # the stop_gradient hides the derivative
    if mode == "full":
        # Truth: f'' = diag(2 x - sin x); TensorFlow's is diag(-sin x). The
        # off-diagonal zeros agree, so exactly the 3 diagonal elements fail.
        x = np.array([0.5, -1.2, 0.9])
        assert second["n_failing"] == 3
        for e in second["failing"]:
            (i,), (j,) = e["output_index"], e["input_index"]
            assert i == j
            assert e["numeric"] == pytest.approx(2 * x[i] - np.sin(x[i]), rel=1e-7)
            assert e["analytic"] == pytest.approx(-np.sin(x[i]), rel=1e-9)


def test_one_rule_for_the_verdict_and_the_count_of_second_order_pairs():
    """A mismatch always has failing elements, a pass none: on a correct model
    (tanh, second derivative -2 tanh (1 - tanh^2)) and on the wrong one."""
    for name in ("blame_second_order.py", "verdict_second_order_nan.py"):
        for mode in ("full", "fast"):
            run, doc = checked(name, "--order", "2", "--mode", mode)
            for pair in pairs(doc).values():
                assert (pair["verdict"] == "mismatch") <= (pair["n_failing"] > 0), pair
                assert (pair["verdict"] == "pass") <= (pair["n_failing"] == 0), pair


def test_second_order_culprit_is_the_innermost_rule_at_fault():
    """outer_cube's gradient calls inner_square, whose own gradient is 3x
    instead of 2x: the second derivative is wrong in inner_square, which is
    named, with its probe off by exactly 3/2 (closed form)."""
    name = "blame_second_order_inner.py"
    run, doc = checked(name, "--order", "2")
    assert run.exit_code == 1, run
    found = pairs(doc)
    assert found[("x", "output")]["verdict"] == "pass"  # the first derivative is right
    culprit = found[("x", "d(output)/dx")]["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient inner_square", culprit
    assert culprit["definition"] == at(name, "def inner_square(")
    assert culprit["checked"] == "own gradient, called in the gradient of tf.custom_gradient outer_cube"
    assert culprit["analytic"] == pytest.approx(1.5 * culprit["numeric"], rel=1e-6)


def test_a_wrong_rule_inside_a_while_loop_is_named_in_the_loops_culprit():
    name = "blame_while_body.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    culprit = pairs(doc)[("x", "output")]["culprit"]
    body_line = source_line(fixture(name), "lambda i, y: (i + 1, soft(y)")
    assert culprit["site"]["description"] == (
        f"StatelessWhile, whose body holds tf.custom_gradient soft at tests/models/{name}:{body_line} "
        f"(defined at {at(name, 'def soft(')})"
    ), culprit


def test_an_lstm_culprit_names_its_layer_and_the_rule_in_its_body():
    name = "blame_lstm_activation.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    culprits = [p["culprit"] for p in pairs(doc).values() if p["failed"] and p["culprit"]]
    assert culprits, run
    defined = at(name, "def act(")
    for culprit in culprits:
        assert culprit["site"]["description"] == (
            f"StatelessWhile in Keras layer 'lstm', whose body holds tf.custom_gradient act at {defined} "
            f"(defined at {defined})"
        ), culprit


# -- Keras ----------------------------------------------------------------------------


def test_keras_layer_culprit_names_the_layer_and_the_line_in_its_call():
    name = "blame_keras_layer.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    x = np.array([[0.3, -1.0, 0.7], [1.2, 0.4, -0.5]])
    kernel = np.array([[0.5, -0.3], [0.2, 0.8], [-0.6, 0.1]])
    z = x @ kernel
    s = 1 / (1 + np.exp(-z))
    dz = s + z * s * (1 - s)
    truth = {"x": dz @ kernel.T, "gate/kernel": x.T @ dz}
    for (input_name, _), pair in pairs(doc).items():
        assert pair["verdict"] == "mismatch"
        for e in elements(pair):
            assert e["numeric"] == pytest.approx(truth[input_name][tuple(e["input_index"])], rel=1e-7)
        culprit = pair["culprit"]
        assert culprit["site"]["description"] == "tf.custom_gradient swish in Keras layer 'gate' (Swish.call)"
        assert culprit["site"]["location"] == at(name, "return swish(tf.matmul(")
        assert culprit["definition"] == at(name, "def swish(z)")


def test_keras_model_of_a_custom_layer_names_the_layer():
    name = "keras_loss_custom_layer.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    named = [p["culprit"] for p in pairs(doc).values() if p["culprit"]]
    assert named
    for culprit in named:
        assert culprit["site"]["description"] == (
            "tf.custom_gradient softsign in Keras layer 'hidden' (SoftsignDense.call)"
        )
        assert culprit["site"]["location"] == at(name, "return activation(")


def test_a_wrong_custom_gradient_inside_tf_recompute_grad_is_named_not_the_wrapper():
    """tf.recompute_grad wraps the block in a custom gradient defined by
    TensorFlow: the code at fault is the user's ``wave`` inside it, named with
    its own lines; the probe agrees with the closed form cos(x)(1 + 3e-4)."""
    name = "prec_rule_recompute_bad.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    culprit = pairs(doc)[("x", "output")]["culprit"]
    assert culprit["site"]["description"].startswith("tf.custom_gradient wave, inside tf.custom_gradient")
    assert "a library wrapper, tensorflow" in culprit["site"]["description"]
    assert culprit["definition"] == at(name, "def wave(x):")
    assert culprit["site"]["location"] == at(name, "return 2.0 * wave(x)")
    # The op's own gradient is the true one times (1 + 3e-4) on every element, so
    # any probe <u, J^T v> by its gradient is (1 + 3e-4) times the numeric one.
    assert culprit["analytic"] / culprit["numeric"] == pytest.approx(1 + 3e-4, abs=1e-8)


def test_a_nan_gradient_where_the_function_is_smooth_blames_the_op_that_makes_it():
    name = "blame_where_pole.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch"
    # Element (0, 0): analytic NaN, numeric the closed form 1 / (x + 1) = 1/2.
    assert pair["worst"]["numeric"] == pytest.approx(0.5, rel=1e-8)
    assert pair["worst"]["analytic"] == "nan"  # JSON spells a NaN as a string
    culprit = pair["culprit"]
    assert culprit["site"]["op_type"] == "RealDiv"
    assert culprit["site"]["location"] == at(name, "pole = 1.0 / (1.0 - x)")
