"""Excuses are earned: ``surrogate`` needs a straight-through estimator on the
path, ``kink`` a non-smooth op (``gradcli.verdicts.excuses``).

Expected numbers are closed forms from the fixtures' docstrings (the overwritten
entry's true derivative is 0, the slopes of relu and abs, -1e7 sin(1e7 x)),
computed here in float64, and source lines read from the fixture files; never
gradcli's own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import check_json, fixture, line_of, pairs

WEIGHTS = np.array([1.0, 2.0, 5.0, 3.0])  # earn_scatter_overwrite's output weights


def _scatter_truth(u):
    """f(u) = w . merged with merged[1] = u[2] (the later update), merged[3] = u[1]."""
    return WEIGHTS[1] * u[2] + WEIGHTS[3] * u[1]


# -- surrogate: not earned ----------------------------------------------------


def test_scatter_model_computes_the_closed_form():
    # The premise of the fixture: the later update wins, so u[0] does not count.
    from gradcli.model.loading import load_model

    model = load_model(fixture("earn_scatter_overwrite.py"))
    u = np.asarray(model.point["u"])
    assert float(model.outputs["output"]) == pytest.approx(_scatter_truth(u), rel=1e-15)


@pytest.mark.parametrize("options", [(), ("--allow-surrogate",)])
def test_overwritten_scatter_entry_is_a_mismatch_naming_the_op(options):
    path = fixture("earn_scatter_overwrite.py")
    run, doc = check_json(path, *options)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("u", "output")]
    assert pair["verdict"] == "mismatch" and pair["failed"] and pair["n_surrogate"] == 0
    # Closed form df/du = [0, 3, 2]: only u[0] is wrong; TensorFlow gives it w[1] = 2.
    (element,) = pair["failing"]
    assert element["input_index"] == [0]
    assert element["numeric"] == pytest.approx(0.0, abs=1e-9)
    assert element["analytic"] == pytest.approx(WEIGHTS[1])
    culprit = pair["culprit"]["site"]
    line = line_of(path, "= tf.tensor_scatter_nd_update(")
    assert culprit["op_type"] == "TensorScatterUpdate"
    assert culprit["location"] == f"tests/models/earn_scatter_overwrite.py:{line}"
    assert f"TensorScatterUpdate at tests/models/earn_scatter_overwrite.py:{line}" in pair["explanation"]
    assert "not a surrogate" in pair["explanation"]


def test_duplicate_stitch_index_is_a_mismatch_naming_the_op():
    path = fixture("earn_stitch_duplicate.py")
    run, doc = check_json(path, "--allow-surrogate")
    assert run.exit_code == 1, run
    found = pairs(doc)
    a = found[("a", "output")]
    assert a["verdict"] == "mismatch" and a["n_surrogate"] == 0
    # f = a[0] - 2 b[0] + 4 b[1]: df/da = [1, 0]; TensorFlow gives a[1] the -2 of slot 1.
    (element,) = a["failing"]
    assert element["input_index"] == [1]
    assert (element["analytic"], element["numeric"]) == pytest.approx((-2.0, 0.0), abs=1e-9)
    assert a["culprit"]["site"]["op_type"] == "DynamicStitch"
    assert a["culprit"]["site"]["location"].endswith(f"earn_stitch_duplicate.py:{line_of(path, '= tf.dynamic_stitch(')}")
    assert found[("b", "output")]["verdict"] == "pass"


def test_quantizer_beside_a_bug_is_no_straight_through_estimator():
    # sg(round(4u)/4) scaled by 0.5 is not added back to u: no construction.
    path = fixture("earn_not_ste.py")
    run, doc = check_json(path, "--allow-surrogate")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("u", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_surrogate"] == 0
    assert pair["culprit"]["site"]["op_type"] == "TensorScatterUpdate"


# -- surrogate: earned ----------------------------------------------------------


def test_stop_gradient_straight_through_estimator_is_a_surrogate():
    path = fixture("earn_ste_stop_gradient.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("w", "output")]
    assert pair["verdict"] == "surrogate" and pair["failed"]
    # Surrogate gradient c = [1, -2, 3] where the true derivative is 0 (off a step).
    assert pair["n_surrogate"] == 3 and pair["n_failing"] == 0
    assert abs(pair["worst"]["analytic"]) in (1.0, 2.0, 3.0) and pair["worst"]["numeric"] == 0.0
    line = line_of(path, "tf.round(")
    assert f"Round at tests/models/earn_ste_stop_gradient.py:{line}" in pair["explanation"]
    allowed, doc = check_json(path, "--allow-surrogate")
    assert allowed.exit_code == 0, allowed
    assert pairs(doc)[("w", "output")]["verdict"] == "surrogate"


def test_custom_gradient_straight_through_estimator_is_a_surrogate():
    path = fixture("earn_ste_custom_gradient.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    # x = [0.4, -0.2, 1.7, 0.9]: the estimator passes c_i where |x_i| <= 1, so three
    # elements carry a surrogate (x[2]'s gradient is 0, which is right).
    assert pair["verdict"] == "surrogate" and pair["n_surrogate"] == 3
    assert "tf.custom_gradient binarize" in pair["explanation"]
    assert f"Sign at tests/models/earn_ste_custom_gradient.py:{line_of(path, 'tf.sign(')}" in pair["explanation"]
    assert check_json(path, "--allow-surrogate")[0].exit_code == 0


def test_fake_quant_layer_is_a_surrogate_for_weights_and_inputs():
    path = fixture("earn_fake_quant.py")
    run, doc = check_json(path)
    assert run.exit_code == 1, run
    found = pairs(doc)
    # h = W x = [0.53, -1.14] lies inside [-2, 2]: every element of W and x carries
    # the straight-through gradient (c x^T and W^T c), none is a true derivative.
    assert (found[("W", "output")]["verdict"], found[("W", "output")]["n_surrogate"]) == ("surrogate", 6)
    assert (found[("x", "output")]["verdict"], found[("x", "output")]["n_surrogate"]) == ("surrogate", 3)
    assert "FakeQuantWithMinMaxVars" in found[("W", "output")]["explanation"]
    assert check_json(path, "--allow-surrogate")[0].exit_code == 0


# -- kink -------------------------------------------------------------------------


def test_relu_and_abs_kinks_with_their_subgradients():
    path = fixture("earn_kink_relu_abs.py")
    run, doc = check_json(path)
    assert run.exit_code == 0, run
    found = pairs(doc)
    hinge, dist = found[("w", "hinge")], found[("v", "dist")]
    # relu(w t - 1) at w t = 1, t = 2: slopes 0 and t; abs(v - 0.25) at 0.25: -1 and 1.
    for pair, slopes, op in ((hinge, (0.0, 2.0), "relu"), (dist, (-1.0, 1.0), "abs")):
        assert pair["verdict"] == "kink" and not pair["failed"]
        (k,) = pair["kinks"]
        assert (k["left"], k["right"]) == pytest.approx(slopes, abs=1e-7)
        assert k["analytic"] == 0.0 and k["subgradient"]
        assert f"{op} (kink at 0)" in pair["explanation"]


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_gradient_giving_every_tied_maximum_in_full_is_no_subgradient(mode):
    # Windows (v, v, a, b), a and b below v: each element's one-sided slopes are
    # 0 and 1, and this gradient's 1 lies between them, but moving both tied
    # elements by t moves the max by t where the gradient says 2 t (the tie rule,
    # diagnose.tie_direction): the closed form is analytic = 2 numeric per row.
    run, doc = check_json(fixture("earn_tie_every_max.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "y")]
    assert pair["verdict"] == "kink" and pair["failed"]
    assert pair["n_kinks"] == 32 and pair["n_tie_refused"] == 16
    for kink in pair["kinks"]:
        assert kink["input_index"][0] % 4 in (0, 1) and kink["input_index"][0] // 4 == kink["output_index"][0]
        assert kink["left"] == pytest.approx(0.0, abs=1e-8) and kink["right"] == pytest.approx(1.0, rel=1e-8)
        assert kink["analytic"] == 1.0 and kink["tie"] and not kink["subgradient"]
    assert len(pair["tie_refused"]) == 3
    for row in pair["tie_refused"]:
        assert abs(row["numeric"]) > 1e-3
        # within the numeric slope's own error estimate, doubled with it
        assert abs(row["analytic"] - 2.0 * row["numeric"]) <= 2.0 * row["fd_error"] < 1e-5 * abs(row["analytic"])


def test_gradient_of_the_first_tied_maximum_is_a_subgradient():
    # The twin: the first maximum of each window takes the whole gradient
    # (TensorFlow's max-pool rule), the gradient of one active piece.
    run, doc = check_json(fixture("earn_tie_first_max.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "y")]
    assert pair["verdict"] == "kink" and not pair["failed"]
    assert pair["n_kinks"] == 32 and pair["n_tie_refused"] == 0
    for kink in pair["kinks"]:
        assert kink["subgradient"] and not kink["tie"]
        assert kink["analytic"] == (1.0 if kink["input_index"][0] % 4 == 0 else 0.0)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_ties_across_inputs_are_moved_together(mode):
    # max(x, y) at x = y: the tie is across two inputs, so both move. A gradient
    # giving x and y the full upstream gradient says 2 t where the max moves by
    # t (closed form analytic = 2 numeric); TensorFlow's tf.maximum (the twin)
    # gives it to x alone, a subgradient.
    run, doc = check_json(fixture("earn_tie_across_inputs.py"), "--mode", mode)
    assert run.exit_code == 1, run
    for name in ("x", "y"):
        pair = pairs(doc)[(name, "m")]
        assert pair["verdict"] == "kink" and pair["failed"]
        assert pair["n_kinks"] == 8 and pair["n_tie_refused"] == 8
        for row in pair["tie_refused"]:
            assert abs(row["numeric"]) > 1e-3
            assert abs(row["analytic"] - 2.0 * row["numeric"]) <= 2.0 * row["fd_error"] < 1e-5 * abs(row["analytic"])
    run, doc = check_json(fixture("earn_tie_across_inputs_tf.py"), "--mode", mode)
    assert run.exit_code == 0, run
    for name in ("x", "y"):
        pair = pairs(doc)[(name, "m")]
        assert pair["verdict"] == "kink" and not pair["failed"] and pair["n_tie_refused"] == 0


def test_a_tie_across_inputs_with_a_wrong_shaped_gradient_is_a_shape_failure_not_an_error():
    # y's gradient is a scalar for a (8,) input: the tie rule has no block of y
    # to move with x and says nothing; y's pair fails by the shape rule.
    run, doc = check_json(fixture("earn_tie_across_inputs_wrong_shape.py"))
    assert run.exit_code == 1, run
    (model,) = doc["result"]["models"]
    assert model["error"] is None
    y = pairs(doc)[("y", "m")]
    assert y["failed"] and y["verdict"] == "mismatch" and "has shape ()" in y["explanation"]
    assert pairs(doc)[("x", "m")]["n_tie_refused"] == 0


def test_fast_wave_is_never_a_kink_and_passes_at_a_better_step():
    run, doc = check_json(fixture("earn_ill_wave.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass" and pair["n_kinks"] == 0 and pair["kinks"] == []
    assert any("varies too fast" in w for w in pair["warnings"])
    assert not any("kink" in w for w in pair["warnings"])


def test_fast_wave_gradient_matches_the_closed_form():
    # Independent of gradcli's verdict: what is passed is -1e7 sin(1e7 x).
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff

    model = load_model(fixture("earn_ill_wave.py"))
    block = autodiff.jacobians(model.function, model.point, ["x"], ["output"], mode="reverse").blocks
    x = np.asarray(model.point["x"])
    truth = [-1e7 * math.sin(1e7 * v) for v in x]
    assert np.diag(block[("output", "x")].reshape(2, 2)) == pytest.approx(truth, rel=1e-6)


def test_wrong_gradient_of_a_fast_wave_is_a_mismatch_not_a_kink():
    run, doc = check_json(fixture("earn_ill_wave_wrong.py"), "--autodiff", "reverse")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["n_kinks"] == 0
    # The gradient is 0.9 times the closed form: both elements are off by 10%.
    x = [0.3, 0.7]
    assert pair["n_failing"] == 2
    for element in pair["failing"]:
        i = element["input_index"][0]
        assert element["analytic"] == pytest.approx(-0.9e7 * math.sin(1e7 * x[i]), rel=1e-6)


def test_huge_curvature_is_never_a_kink():
    # softplus(1e9 x) / 1e9 at 0: derivative sigmoid(0) = 0.5, exactly what TensorFlow gives.
    run, doc = check_json(fixture("earn_ill_sharp.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "pass" and pair["n_kinks"] == 0
    assert pair["worst"]["analytic"] == pytest.approx(0.5, rel=1e-12)


def test_wrong_gradient_between_apparent_slopes_never_passes():
    # 0.7 instead of 0.5: between the apparent slopes 0 and 1, but no op is non-smooth.
    run, doc = check_json(fixture("earn_ill_sharp_wrong.py"), "--autodiff", "reverse")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["failed"] and pair["verdict"] == "inconclusive" and pair["n_kinks"] == 0
    assert "no op on the path is non-smooth" in pair["explanation"]
    assert pair["worst"]["analytic"] == pytest.approx(0.7, rel=1e-12)


def test_aliased_wave_is_inconclusive_not_a_kink_nor_a_mismatch():
    run, doc = check_json(fixture("earn_ill_aliased.py"), "--autodiff", "reverse")
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "inconclusive" and pair["n_kinks"] == 0
    assert "do not settle" in pair["explanation"]


# -- the graph evidence alone ---------------------------------------------------


@pytest.fixture(scope="module")
def graphs():
    from gradcli.model.loading import load_model
    from gradcli.verdicts.culprit import ModelGraph

    return lambda name: ModelGraph(load_model(fixture(name)))


@pytest.mark.parametrize("name, inp, expected", [
    ("earn_scatter_overwrite.py", "u", []),
    ("earn_not_ste.py", "u", []),
    ("earn_ste_stop_gradient.py", "w", ["StopGradient"]),
    ("earn_ste_custom_gradient.py", "x", ["IdentityN"]),
    ("earn_fake_quant.py", "W", ["FakeQuantWithMinMaxVars"]),
])
def test_straight_through_constructions_from_the_graph(graphs, name, inp, expected):
    from gradcli.verdicts import excuses

    found = excuses.straight_through(graphs(name), inp, "output")
    assert [c.site.op_type for c in found] == expected


@pytest.mark.parametrize("name, inp, output, expected", [
    ("earn_ill_wave.py", "x", "output", []),
    ("earn_ill_sharp.py", "x", "output", []),
    ("earn_kink_relu_abs.py", "w", "hinge", ["Relu"]),
    ("earn_kink_relu_abs.py", "v", "dist", ["Abs"]),
])
def test_nonsmooth_ops_from_the_graph(graphs, name, inp, output, expected):
    from gradcli.verdicts import excuses

    assert [s.op_type for s in excuses.nonsmooth(graphs(name), inp, output)] == expected
