"""Every form TensorFlow returns a derivative in, through every command.

The forms (``numerics.autodiff.dense``): ``tf.IndexedSlices`` (``tf.gather``,
and a custom gradient returning its own), the variables of a
``tf.custom_gradient`` (``grad(dy, variables=None)``, the weight read as a
variable: ``numerics.autodiff.sources_of``). Expected numbers are closed forms
(``tests/models/_gradient_forms.py``), never gradcli's own output.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import FIXTURES, check_json, fixture, gradcli, line_of, pairs

sys.path.insert(0, str(FIXTURES))
import _gradient_forms as forms  # noqa: E402


def variable_gradient(scale=1.0):
    """d sum(tanh(x w)) / dw, and the full Jacobian d tanh(x w)[i, j] / dw[k]."""
    y = np.tanh(forms.X * forms.W0)
    local = (1 - y**2) * forms.X  # dy[i, j] / dw[j]
    jacobian = np.zeros(forms.X.shape + forms.W0.shape)
    for j in range(forms.W0.size):
        jacobian[:, j, j] = local[:, j]
    return scale * local.sum(axis=0), jacobian


FORMS = ["forms_gather.py", "forms_gather_custom.py", "forms_variable.py", "forms_segment_sum.py", "forms_scatter.py"]


@pytest.mark.parametrize("autodiff_modes", ["both", "reverse"])
@pytest.mark.parametrize("mode", ["full", "fast"])
@pytest.mark.parametrize("name", FORMS)
def test_right_gradients_in_every_form_pass(name, mode, autodiff_modes):
    """Every form through every comparison: the reverse-mode blocks and probes
    against finite differences, and (``both``) forward mode's probes against
    them; a JVP that came back as ``tf.IndexedSlices`` (segment_sum) ended
    forward mode in an internal error. (TensorFlow's forward mode cannot
    transpose a custom gradient that returns ``IndexedSlices``, raising in its
    own code: that pair keeps its reverse-mode verdict with a warning.)"""
    run, document = check_json(fixture(name), "--mode", mode, "--autodiff", autodiff_modes)
    assert run.exit_code == 0, run
    assert all(p["verdict"] == "pass" for p in pairs(document).values()), run
    if autodiff_modes == "both" and name in CLOSED_JACOBIANS:  # forward mode checked, not skipped
        assert not any("forward mode" in w for p in pairs(document).values() for w in p["warnings"]), run


CLOSED_JACOBIANS = {
    "forms_segment_sum.py": ("x", forms.SEG_X, forms.segment_jacobian),
    "forms_scatter.py": ("u", forms.SCATTER_U, forms.scatter_jacobian),
}


@pytest.mark.parametrize("name", sorted(CLOSED_JACOBIANS))
def test_jacobian_jvp_and_vjp_of_keras_sparse_ops_are_their_closed_forms(name, tmp_path):
    x_name, x, closed = CLOSED_JACOBIANS[name]
    jacobian = closed()
    out_shape = jacobian.shape[: jacobian.ndim - x.ndim]
    for mode in ("forward", "reverse"):
        run = gradcli("jacobian", fixture(name), "--mode", mode, "--save", tmp_path / f"{mode}.npz")
        assert run.exit_code == 0, run
        np.testing.assert_allclose(np.load(tmp_path / f"{mode}.npz")[f"output/{x_name}"], jacobian, rtol=1e-12, atol=1e-15)
    rng = np.random.default_rng(5)
    t, c = rng.standard_normal(x.shape), rng.standard_normal(out_shape)
    flat = jacobian.reshape(int(np.prod(out_shape)), x.size)
    run = gradcli("jvp", fixture(name), "--tangent", f"{x_name}={t.tolist()}", "--save", tmp_path / "t.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "t.npz")["output"], (flat @ t.reshape(-1)).reshape(out_shape), rtol=1e-12, atol=1e-15)
    run = gradcli("vjp", fixture(name), "--cotangent", f"output={c.tolist()}", "--save", tmp_path / "v.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")[x_name], (c.reshape(-1) @ flat).reshape(x.shape), rtol=1e-12, atol=1e-15)


def test_every_product_leaves_the_seam_dense():
    """Each product of ``numerics.autodiff`` on keras.ops.segment_sum, whose
    forward-mode derivative TensorFlow gives as ``tf.IndexedSlices``: numpy
    arrays equal to the closed form, eager and traced (one tf.map_fn over the
    tangents), few and many, and the Hessian-vector products."""
    from gradcli.numerics import autodiff
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    segment, _ = forms.segment_model()
    function = lambda values: {"output": segment(values["x"])}  # noqa: E731
    point = {"x": forms.SEG_X}
    jacobian = forms.segment_jacobian().reshape(6, forms.SEG_X.size)
    for mode in ("forward", "reverse"):
        block = autodiff.jacobians(function, point, ["x"], ["output"], mode=mode).blocks[("output", "x")]
        assert isinstance(block, np.ndarray), (mode, type(block))
        np.testing.assert_allclose(block.reshape(jacobian.shape), jacobian, rtol=1e-12, atol=1e-15)
    for k in (3, autodiff.EAGER_MAX_TANGENTS + 1):
        tangents = np.random.default_rng(k).standard_normal((k,) + forms.SEG_X.shape)
        for take in (autodiff.batched_jvp, autodiff.traced_jvp):
            found = take(function, point, {"x": tangents}, ["output"])["output"]
            assert isinstance(found, np.ndarray), (take.__name__, type(found))
            np.testing.assert_allclose(found.reshape(k, -1), tangents.reshape(k, -1) @ jacobian.T, rtol=1e-12, atol=1e-15)
    (grads,) = autodiff.vjps(function, point, ["x"], [{"output": np.ones((3, 2))}])
    np.testing.assert_allclose(grads["x"], (np.ones(6) @ jacobian).reshape(forms.SEG_X.shape), rtol=1e-12)
    # f = sum(segment_sum(sin(x) w)): H = diag(-sin(x) w)
    scalar = lambda x: tf.reduce_sum(segment(x))  # noqa: E731
    x, v = tf.constant(forms.SEG_X), tf.constant(np.ones_like(forms.SEG_X))
    for hvp in (autodiff.hvp_forward_over_reverse, autodiff.hvp_reverse_over_reverse):
        found = autodiff.to_numpy(hvp(scalar, x, v))
        np.testing.assert_allclose(found, -np.sin(forms.SEG_X) * forms.SEG_WEIGHTS, rtol=1e-12)


def test_the_reverse_jacobian_takes_one_backward_pass_per_output_element():
    """The reach VJP (None where disconnected, and the gradient's shape) is the
    first unit row where the rows are unrolled: a 4-element output's Jacobian
    calls the gradient function 4 times, eagerly and in a kept program (and
    a 1-element output's once, seeded with ones), and its blocks are the
    closed forms; a disconnected input stays None and a gradient of the wrong
    shape its ``WrongShape``."""
    from gradcli.numerics import autodiff
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    seen = []

    @tf.custom_gradient
    def cube(x):
        def grad(dy):
            seen.append(1)
            return dy * 3 * x * x
        return x ** 3, grad

    @tf.custom_gradient
    def flat_sum(v):  # its gradient drops v's shape: a (3,) gradient for a (1, 3) input
        return tf.reduce_sum(v), lambda dy: tf.fill([3], dy)

    def function(values):
        return {"y": cube(values["x"]) * 2.0, "s": tf.reduce_sum(cube(values["x"])) + flat_sum(values["v"])}

    x = np.array([0.5, -1.0, 2.0, 1.5])
    point = {"x": x, "v": np.ones((1, 3)), "unused": np.ones(2)}
    wrt = ["x", "v", "unused"]
    eager = autodiff.jacobians(function, point, wrt, ["y", "s"], mode="reverse").blocks
    assert len(seen) == x.size + 1  # 4 rows of y, 1 of s
    program = autodiff.Program(function, {n: tf.TensorSpec(v.shape, tf.float64) for n, v in point.items()},
                               wrt, ["y", "s"])
    seen.clear()
    traced = program.jacobians(point)
    assert len(seen) == x.size + 1  # once each while tracing
    for blocks in (eager, traced):
        np.testing.assert_allclose(blocks[("y", "x")], np.diag(6 * x * x), rtol=1e-15)
        np.testing.assert_allclose(blocks[("s", "x")], 3 * x * x, rtol=1e-15)
        assert blocks[("y", "v")] is None and blocks[("y", "unused")] is None and blocks[("s", "unused")] is None
        assert blocks[("s", "v")] == autodiff.WrongShape(expected=(1, 3), got=(3,))


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_indexed_slices_gradient_fails_with_its_culprit(mode):
    run, document = check_json(fixture("forms_gather_custom_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    pair = pairs(document)[("table", "output")]
    assert pair["verdict"] == "mismatch", run
    if mode == "full":  # analytic = 1.5 x the closed form, numeric = the closed form
        worst = pair["worst"]
        assert worst["analytic"] == pytest.approx(1.5 * worst["numeric"], rel=1e-7)
    culprit = pair["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient lookup", culprit
    defined = line_of(FIXTURES / "_gradient_forms.py", "def lookup(table, idx)")
    assert culprit["definition"].endswith(f"_gradient_forms.py:{defined}"), culprit


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_wrong_variable_gradient_of_a_custom_gradient_fails_on_that_weight(mode):
    run, document = check_json(fixture("forms_variable_wrong.py"), "--mode", mode)
    assert run.exit_code == 1, run
    found = pairs(document)
    assert found[("scaled/w", "output")]["verdict"] == "mismatch", run
    assert found[("x", "output")]["verdict"] == "pass", run  # its input gradient is right
    if mode == "full":
        worst = found[("scaled/w", "output")]["worst"]
        assert worst["analytic"] == pytest.approx(2.0 * worst["numeric"], rel=1e-7)


def test_vjp_through_gather_is_the_closed_form(tmp_path):
    run = gradcli("vjp", fixture("forms_gather.py"), "--save", tmp_path / "v.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")["table"], forms.gather_gradient(), rtol=1e-12)


def test_jacobian_and_jvp_through_gather_are_the_closed_form(tmp_path):
    run = gradcli("jacobian", fixture("forms_gather.py"), "--save", tmp_path / "j.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(
        np.load(tmp_path / "j.npz")["output/table"], forms.gather_gradient(), rtol=1e-12)
    tangent = np.zeros_like(forms.TABLE)
    tangent[2, 1] = 1.0
    run = gradcli("jvp", fixture("forms_gather.py"), "--tangent", f"table={tangent.tolist()}",
                  "--save", tmp_path / "t.npz")
    assert run.exit_code == 0, run
    assert float(np.load(tmp_path / "t.npz")["output"]) == pytest.approx(
        forms.gather_gradient()[2, 1], rel=1e-12)


def test_vjp_and_jacobian_of_a_custom_gradients_variable_are_the_users_rule(tmp_path):
    run = gradcli("vjp", fixture("forms_variable_wrong.py"), "--wrt", "scaled/w",
                  "--save", tmp_path / "v.npz")
    assert run.exit_code == 0, run  # what the user's rule gives: 2x the true gradient
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")["scaled/w"], variable_gradient(2.0)[0], rtol=1e-12)
    run = gradcli("jacobian", fixture("forms_variable.py"), "--wrt", "scaled/w", "--save", tmp_path / "j.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "j.npz")["output/scaled/w"], variable_gradient()[1], rtol=1e-12)


def test_second_order_through_gather_passes():
    run, document = check_json(fixture("forms_gather.py"), "--order", "2")
    assert run.exit_code == 0, run


def test_every_derivative_is_taken_through_the_one_seam():
    """``GradientTape.gradient``, ``tf.gradients`` and ``ForwardAccumulator`` are
    called in ``numerics/autodiff.py`` alone: a second path that converts
    TensorFlow's results its own way is where an ``IndexedSlices`` crashed the
    proof. Calls are found in the syntax tree (docstrings may name them)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "gradcli"

    def derivative_call(node) -> bool:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return False
        owner = ast.unparse(node.func.value)
        return (
            (node.func.attr == "gradient" and "tape" in owner)
            or (node.func.attr == "gradients" and owner == "tf")
            or node.func.attr == "ForwardAccumulator"
        )

    found = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py") if path.name != "autodiff.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if derivative_call(node)
    ]
    assert found == [], found


def test_forward_mode_unavailable_through_an_op_is_a_named_warning_not_a_mismatch():
    run, document = check_json(fixture("forward_unavailable_resize.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass", pair
    line = line_of(fixture("forward_unavailable_resize.py"), "tf.image.resize(")
    (warning,) = [w for w in pair["warnings"] if w.startswith("forward mode unavailable")]
    assert warning.startswith(
        f"forward mode unavailable through ResizeBilinear at tests/models/forward_unavailable_resize.py:{line}:"
    ), warning


def test_forward_mode_through_a_tf_function_with_a_while_loop_is_checked(tmp_path):
    run, document = check_json(fixture("forward_while_function.py"))
    assert run.exit_code == 0, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "pass" and not any("forward mode" in w for w in pair["warnings"]), pair
    x = np.linspace(-1.0, 1.0, 48).reshape(6, 8)
    derivative, y = np.ones_like(x), x
    for _ in range(3):
        derivative, y = derivative * 1.5 * np.cos(y), 1.5 * np.sin(y)
    tangent = np.zeros_like(x)
    tangent[2, 3] = 1.0
    run = gradcli("jvp", fixture("forward_while_function.py"), "--tangent", f"x={tangent.tolist()}",
                  "--save", tmp_path / "t.npz")
    assert run.exit_code == 0, run
    np.testing.assert_allclose(np.load(tmp_path / "t.npz")["output"], derivative * tangent, rtol=1e-12, atol=1e-15)


def test_forward_mode_of_a_tf_function_is_checked_traced_and_eagerly():
    """Closed form: the eager JVP along u is <v, x u> (the forward ops'
    derivative x), finite differences give <v, 2x u>: the reported forward
    value is half the numeric one."""
    run, document = check_json(fixture("forward_custom_in_function.py"))
    assert run.exit_code == 1, run
    pair = pairs(document)[("x", "output")]
    assert pair["verdict"] == "mismatch", pair
    assert "with the model's tf.functions run eagerly" in pair["explanation"], pair
    forward, numeric = pair["forward_probe"]
    assert forward == pytest.approx(0.5 * numeric, rel=1e-7)
    assert pair["culprit"]["site"]["description"].startswith("tf.custom_gradient square: forward mode differentiates")


def remembering_flow():
    """y = sinh(x) * w, a model that, like a TensorFlow Probability bijector,
    answers from its cache when called with a tensor object it has seen
    (``numerics.autodiff.fresh``); ``reused`` lists every argument it was
    handed again. Its log-det per example is sum log(cosh(x) |w|)."""
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    seen, cache, reused = [], [], []

    def model(x, w):
        for t in (x, w):
            if any(t is s for s in seen):  # strong references: no id is reused
                reused.append(t)
            seen.append(t)
        for (cx, cw), y in cache:
            if cx is x and cw is w:
                return y
        y = tf.sinh(x) * w
        cache.append(((x, w), y))
        return y

    model.log_det_jacobian = lambda x, w: tf.reduce_sum(tf.math.log(tf.cosh(x) * tf.abs(w)), axis=-1)
    return model, reused


def test_no_call_of_any_command_sees_a_tensor_an_earlier_call_saw():
    """Every command and mode (check, both modes, full and fast, warm; vjp,
    jvp, jacobian in every mode, hessian, logdet) hands the model tensors of
    its own at every call, the input it does not differentiate (w) included,
    and its numbers are the closed forms: dy/dx = cosh(x) w."""
    import gradcli

    x = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5]])
    w = np.array([1.5, -0.5, 2.0])
    d = np.cosh(x) * w
    model, reused = remembering_flow()
    for options in ({}, {"autodiff": "reverse"}, {"mode": "fast"}, {}, {}):  # the last two warm
        result = gradcli.check(model, (x, w), wrt=["x"], **options)
        assert result.ok and [p.verdict for p in result.models[0].pairs] == ["pass"], (options, result)
    c = np.linspace(-1.0, 1.0, 6).reshape(x.shape)
    np.testing.assert_allclose(gradcli.vjp(model, (x, w), {"output": c}, wrt=["x"]).arrays()["x"], c * d, rtol=1e-12)
    np.testing.assert_allclose(gradcli.jvp(model, (x, w), {"x": c}).arrays()["output"], c * d, rtol=1e-12)
    truth = np.zeros(x.shape + x.shape)
    for i in np.ndindex(x.shape):
        truth[i + i] = d[i]
    for mode in ("auto", "forward", "reverse"):
        found = gradcli.jacobian(model, (x, w), mode=mode, wrt=["x"]).arrays()["output/x"]
        np.testing.assert_allclose(found, truth, rtol=1e-12, err_msg=mode)
    hessian = gradcli.hessian(model, (x, w), wrt=["x"], cotangents={"output": np.ones_like(x)}).hessian
    np.testing.assert_allclose(hessian, np.diag((np.sinh(x) * w).reshape(-1)), rtol=1e-9, atol=1e-12)
    result = gradcli.logdet(model, (x, w), wrt="x")
    assert result.n_failing == 0, result
    np.testing.assert_allclose([e.logabsdet for e in result.examples], np.log(np.abs(d)).sum(axis=1), rtol=1e-12)
    assert reused == [], f"{len(reused)} calls were handed a tensor an earlier call saw"


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_a_formed_point_is_the_tensor_of_the_memory_it_was_formed_in(dtype):
    """``held.formed``: the tensor holds exactly what the fill wrote
    (x + d s, bitwise as numpy forms it), in that array's memory (aligned as
    TensorFlow needs: no copy into fresh memory), and keeps it alive once
    every numpy name for it is gone; a dtype DLPack does not carry, and a
    0-d value, are converted as before."""
    import gc

    import tensorflow as tf

    from gradcli.numerics import held

    rng = np.random.default_rng(0)
    x, d = (rng.standard_normal(12).astype(dtype) for _ in range(2))
    step = np.dtype(dtype).type(0.37)
    written = []

    def fill(out):
        np.multiply(d, step, out=out)
        np.add(out, x, out=out)
        written.append(out.ctypes.data)

    tensor = held.formed((3, 4), dtype, fill)
    gc.collect()
    assert tensor.shape == (3, 4) and tensor.dtype == tf.as_dtype(dtype)
    assert np.array_equal(tensor.numpy().reshape(-1), x + d * step)
    assert written[0] % held.ALIGNMENT == 0
    assert np.asarray(tensor).ctypes.data == written[0]  # the fill's memory, not a copy
    assert float(tf.reduce_sum(tf.abs(tensor))) > 0  # a TensorFlow op runs on it
    bfloat = held.formed((2,), tf.bfloat16.as_numpy_dtype, lambda out: out.fill(1.5))
    assert bfloat.dtype == tf.bfloat16 and bfloat.numpy().tolist() == [1.5, 1.5]
    assert held.formed((), dtype, lambda out: out.fill(2.0)).numpy() == 2.0


def test_a_formed_array_is_its_tensor_read_only_and_dies_before_it():
    """``held.formed_array`` (the layer pass's tangents): the array holds what
    the fill wrote, cannot be written, and ``tensor_of`` gives one tensor over
    the array's own memory; the array dies when its last name goes, while the
    tensor lives on with the values, and its entry goes with it (a tensor
    that kept its own view alive would keep both for ever); ``formed`` leaves
    no entry. ``held.normals`` fills with the numbers
    ``standard_normal(shape).astype(dtype)`` draws, in place."""
    import gc
    import weakref

    from gradcli.numerics import held

    array = held.formed_array((3, 4), "float64", lambda out: np.copyto(out, np.arange(12.0)))
    assert np.array_equal(array, np.arange(12.0).reshape(3, 4)) and not array.flags.writeable
    with pytest.raises(ValueError):
        array[0, 0] = 1.0
    tensor = held.tensor_of(array)
    assert held.tensor_of(array) is tensor and np.asarray(tensor).ctypes.data == array.ctypes.data
    view, entry = weakref.ref(array), held._HELD[id(array)]
    del array
    gc.collect()  # the tensor lives on and keeps the memory, not the array: its entry goes
    assert view() is None and all(e is not entry for e in held._HELD.values())
    assert tensor.numpy().tolist() == np.arange(12.0).reshape(3, 4).tolist()
    formed = held.formed((5,), "float64", lambda out: out.fill(2.0))
    gc.collect()
    assert all(e[1] is not formed for e in held._HELD.values()) and formed.numpy().tolist() == [2.0] * 5
    for dtype in ("float64", "float32", "complex128"):
        drawn = held.formed_array((2, 3), dtype, held.normals(np.random.default_rng(5)))
        expected = np.random.default_rng(5).standard_normal((2, 3)).astype(dtype)
        assert drawn.dtype == expected.dtype and np.array_equal(drawn, expected)


def test_a_held_point_is_converted_once_and_cannot_change():
    """``numerics.held``: a held point's arrays are read-only views of tensors
    made once (the caller's arrays untouched and still writable); every
    conversion of a held array gives that one tensor, with the array's values;
    anything else (a slice of a view, a string array) is converted as before;
    an entry leaves with its view. The model's calls still get fresh tensors
    (``test_no_call_of_any_command_sees_a_tensor_an_earlier_call_saw``)."""
    import gc

    from gradcli.numerics import held

    given = {"w": np.arange(6.0).reshape(2, 3), "ids": np.array([3, 1], np.int32), "tag": np.array(["a"])}
    point = held.hold(dict(given))
    assert point["tag"] is given["tag"]
    for name in ("w", "ids"):
        view, array = point[name], given[name]
        assert view is not array and not view.flags.writeable and array.flags.writeable
        assert view.dtype == array.dtype and np.array_equal(view, array)
        tensor = held.tensor_of(view)
        assert held.tensor_of(view) is tensor and np.array_equal(tensor.numpy(), array)
        with pytest.raises(ValueError):
            view[0] = 7
    assert held.hold(point)["w"] is point["w"]  # held once
    assert held.tensor_of(point["w"][0]) is not held.tensor_of(point["w"])
    np.testing.assert_array_equal(held.tensor_of(point["w"][1]).numpy(), [3.0, 4.0, 5.0])
    given["w"][0, 0] = 9.0  # the caller's array is its own
    assert point["w"][0, 0] == 0.0 and held.tensor_of(point["w"]).numpy()[0, 0] == 0.0
    entries = {id(point[n]): held._HELD[id(point[n])] for n in ("w", "ids")}
    del point, view
    gc.collect()
    assert all(held._HELD.get(key) is not entry for key, entry in entries.items())
