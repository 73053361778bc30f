"""Keras and SavedModel workflows (issue 13): a Keras `loss` checked by weight,
training mode, SavedModel folders and .keras files as MODEL, --native-dtype
for the inspection commands. Every number is checked against a hand-written
float64 reference (numpy) or a closed form, never against gradcli's output."""

from __future__ import annotations

import types

import numpy as np
import pytest

from gradcli.errors import ModelError
from gradcli.model.paths import relative_path
from tests.conftest import fixture, gradcli, line_of, sample

CUSTOM = fixture("keras_loss_custom_layer.py")


def by_input(document) -> dict:
    (model,) = document["models"]
    return {p["input"]: p for p in model["pairs"]}


def softsign_mse_reference(point: dict, square: bool = True):
    """Loss mean((softsign(x W1 + b1) W2 + b2 - y)**2) and its gradient, by hand
    in float64. ``square=False`` gives what the buggy custom gradient computes
    (softsign' taken as 1 / (1 + |z|) instead of 1 / (1 + |z|)**2)."""
    x, y = point["x"].astype(np.float64), point["y"].astype(np.float64)
    w1, b1 = point["hidden/kernel"], point["hidden/bias"]
    w2, b2 = point["out/kernel"], point["out/bias"]
    z = x @ w1 + b1
    h = z / (1 + np.abs(z))
    residual = h @ w2 + b2 - y
    loss = np.mean(residual**2)
    d_pred = 2 * residual / residual.size
    d_h = d_pred @ w2.T
    d_z = d_h / (1 + np.abs(z)) ** (2 if square else 1)
    grads = {
        "hidden/kernel": x.T @ d_z, "hidden/bias": d_z.sum(axis=0),
        "out/kernel": h.T @ d_pred, "out/bias": d_pred.sum(axis=0), "x": d_z @ w1.T,
    }
    return loss, grads


@pytest.fixture(scope="module")
def custom_point():
    from gradcli.model.loading import load_model

    return dict(load_model(CUSTOM + ":fixed").point)


# --- 1. a loss beside a Keras model ---------------------------------------------------


def test_wrong_custom_gradient_in_a_layer_fails_by_weight_element_and_definition(custom_point):
    run = gradcli("check", CUSTOM, "--json")
    assert run.exit_code == 1, run
    pairs = by_input(run.result)
    # The data x by default beside the weights (not the targets y): backpropagation
    # carries the wrong softsign gradient to x as well.
    assert set(pairs) == {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias", "x"}
    assert {n for n, p in pairs.items() if p["failed"]} == {"hidden/kernel", "hidden/bias", "x"}
    _, true = softsign_mse_reference(custom_point)
    _, buggy = softsign_mse_reference(custom_point, square=False)
    for name in ("hidden/kernel", "hidden/bias", "x"):
        pair = pairs[name]
        assert pair["output"] == "loss" and pair["verdict"] == "mismatch"
        worst = pair["worst"]
        index = tuple(worst["input_index"])
        # the numeric side is the true derivative, the analytic one the bug's
        assert worst["numeric"] == pytest.approx(true[name][index], rel=1e-7)
        assert worst["analytic"] == pytest.approx(buggy[name][index], rel=1e-9)
        definition = f"{relative_path(CUSTOM)}:{line_of(CUSTOM, 'def softsign(z)')}"
        assert pair["culprit"]["definition"] == definition
        # The custom gradient, and the Keras layer whose call made it.
        assert pair["culprit"]["site"]["description"] == (
            "tf.custom_gradient softsign in Keras layer 'hidden' (SoftsignDense.call)"
        )
    notes = run.result["models"][0]["notes"]
    assert any("mean_squared_error(y, model(x)), averaged over its elements" in n for n in notes)
    assert "differentiated with respect to input x and 4 weights (every floating input and trainable weight, " \
        "not the targets y; `wrt` narrows)" in notes


def test_correct_layer_passes_and_loss_matches_float64_reference(custom_point):
    import gradcli as api

    run = gradcli("check", CUSTOM + ":fixed", "--json")
    assert run.exit_code == 0, run
    assert all(p["verdict"] == "pass" for p in by_input(run.result).values())
    loss, grads = softsign_mse_reference(custom_point)
    (output,) = api.forward(CUSTOM + ":fixed").outputs
    assert output.name == "loss" and float(output.values) == pytest.approx(loss, rel=1e-12)
    result = api.vjp(CUSTOM + ":fixed")
    assert result.dtype == "float64"
    arrays = result.arrays()
    for name, expected in grads.items():
        np.testing.assert_allclose(arrays[name], expected, rtol=1e-10, atol=1e-14)


def linear_module(loss, **attributes):
    """y_pred = x W + b with known weights, as a model file would hold it."""
    import keras

    x = keras.Input((3,), name="x")
    layer = keras.layers.Dense(2, name="dense")
    network = keras.Model(x, layer(x))
    layer.set_weights([W.astype("float32"), B.astype("float32")])
    module = types.ModuleType("linear_loss")
    module.model, module.loss = network, loss
    module.inputs = {"x": X, "y": Y}
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


W = np.array([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]])
B = np.array([0.125, -0.5])
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 2.0], [0.0, 1.0, 1.0], [-2.0, 0.0, 0.5]])
Y = np.array([[1.0, 0.0], [-1.0, 2.0], [0.5, 0.5], [0.0, -1.0]])


def _mse_forms():
    import keras

    squared = lambda y_true, y_pred: (y_true - y_pred) ** 2  # noqa: E731 - per element
    return {
        "name": ("mse", 1.0),
        "function": (keras.losses.mean_squared_error, 1.0),
        "object": (keras.losses.MeanSquaredError(), 1.0),
        "class": (keras.losses.MeanSquaredError, 1.0),
        "per-element callable": (squared, 1.0),
        "object, sum": (keras.losses.MeanSquaredError(reduction="sum"), float(len(X))),
    }


@pytest.mark.parametrize("form", ["name", "function", "object", "class", "per-element callable", "object, sum"])
def test_loss_forms_give_keras_training_loss_and_gradient(form):
    """Closed form: L = s * mean((x W + b - y)**2) with s = 1 for Keras's default
    reduction (the mean over every element), s = batch size for reduction="sum"
    (per-sample means, summed); dL/dW = 2 s x^T r / r.size, dL/db = 2 s sum(r) / r.size."""
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    loss, scale = _mse_forms()[form]
    model = load_model(linear_module(loss))
    residual = X @ W + B - Y
    assert float(model.outputs["loss"]) == pytest.approx(scale * np.mean(residual**2), rel=1e-12)
    assert model.wrt == ["dense/kernel", "dense/bias", "x"] and model.dtype == np.float64
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["dense/kernel"], 2 * scale * X.T @ residual / residual.size, rtol=1e-12)
    np.testing.assert_allclose(grads["dense/bias"], 2 * scale * residual.sum(axis=0) / residual.size, rtol=1e-12)


def test_loss_gradient_with_respect_to_x_when_named():
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    model = load_model(linear_module("mse"), wrt=["x", "dense/kernel"])
    residual = X @ W + B - Y
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["x"], 2 * residual @ W.T / residual.size, rtol=1e-12)


@pytest.mark.parametrize("change, message", [
    ({"loss": "msee"}, "`loss` 'msee' is not a Keras loss name"),
    ({"loss": 3}, "`loss` is a int, not a callable"),
    ({"inputs": {"x": X}}, "a `loss` needs the targets as input 'y' in `inputs` (inputs: x)"),
    ({"training": "yes"}, "`training` must be True or False, got 'yes'"),
])
def test_loss_contract_errors(change, message):
    from gradcli.model.loading import load_model

    module = linear_module("mse")
    for name, value in change.items():
        setattr(module, name, value)
    with pytest.raises(ModelError) as raised:
        load_model(module)
    assert message in str(raised.value)


def batchnorm_module(training: bool):
    import keras

    network = keras.Sequential([
        keras.Input((3,)),
        keras.layers.Dense(4, name="d"),
        keras.layers.BatchNormalization(name="bn"),
        keras.layers.Dropout(0.5, name="drop"),
        keras.layers.Dense(1, name="out"),
    ])
    module = types.ModuleType("batchnorm")
    module.model, module.loss, module.training = network, "mse", training
    module.inputs = {"x": X, "y": Y[:, :1]}
    return module


def test_training_mode_is_inference_unless_the_file_says_so():
    """Closed form: in training mode BatchNormalization subtracts the batch mean,
    so a bias added just before it cancels: dL/d(d/bias) = 0 exactly. In
    inference mode (moving mean 0, variance 1 at initialisation) it does not."""
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    inference = load_model(batchnorm_module(training=False))
    assert any("layers bn, drop ran with training=False (inference mode)" in n for n in inference.notes)
    assert np.linalg.norm(inspection.vjp(inference).arrays()["d/bias"]) > 1e-3
    training = load_model(batchnorm_module(training=True))  # dropout masks fixed per call
    assert any("layers bn, drop ran with training=True" in n for n in training.notes)
    np.testing.assert_allclose(training.outputs["loss"], training.call()["loss"], rtol=0)
    np.testing.assert_allclose(inspection.vjp(training).arrays()["d/bias"], 0.0, atol=1e-12)


def test_plain_keras_model_notes_nothing_about_training():
    from gradcli.model.loading import load_model

    model = load_model(sample("keras_mlp.py"))
    assert not any("training" in n for n in model.notes)


# --- 3. SavedModel folders and .keras files ---------------------------------------------


@pytest.fixture(scope="module")
def saved_module(tmp_path_factory):
    """y = s * tanh(x W + b) as a tf.Module (float64) with a nested module holding s,
    saved with a serving signature and a traced __call__."""
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self):
            super().__init__()
            self.s = tf.Variable(1.5, dtype=tf.float64)

        def __call__(self, h):
            return self.s * h

    class Layer(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(W, dtype=tf.float64)
            self.b = tf.Variable(B, dtype=tf.float64)
            self.inner = Scale()

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64, name="x")])
        def __call__(self, x):
            return {"y": self.inner(tf.tanh(x @ self.w + self.b))}

    module = Layer()
    folder = tmp_path_factory.mktemp("saved") / "tanh_layer"
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.__call__})
    data = folder.parent / "data.npz"
    np.savez(data, x=X, other=Y)
    return str(folder), str(data)


def test_saved_model_check_and_vjp_by_variable_path(saved_module):
    folder, data = saved_module
    run = gradcli("check", folder, "--input", f"x=@{data}:x", "--json")
    assert run.exit_code == 0, run
    assert {(n, p["output"]) for n, p in by_input(run.result).items()} == {
        ("w", "y"), ("b", "y"), ("inner/s", "y"),
    }
    # closed form with ones as cotangent: y = s t, t = tanh(x W + b)
    t = np.tanh(X @ W + B)
    d_z = 1.5 * (1 - t**2)
    run = gradcli("vjp", folder + ":__call__", "--input", f"x=@{data}:x", "--json")
    assert run.exit_code == 0, run
    grads = {g["name"]: np.asarray(g["values"]) for g in run.result["gradients"]}
    np.testing.assert_allclose(grads["w"], X.T @ d_z, rtol=1e-12)
    np.testing.assert_allclose(grads["b"], d_z.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(grads["inner/s"], t.sum(), rtol=1e-12)
    assert [w["name"] for w in run.result["weights"]] == ["w", "b", "inner/s"]


def test_saved_model_weights_are_never_assigned(saved_module):
    import tensorflow as tf

    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    folder, _ = saved_module
    model = load_model(folder + ":serving_default", input={"x": X}, wrt=["inner/s", "x"])
    shifted = dict(model.point, **{"inner/s": np.float64(-2.0)})
    t = np.tanh(X @ W + B)
    np.testing.assert_allclose(model.call(shifted)["y"], -2.0 * t, rtol=1e-12)
    np.testing.assert_allclose(model.call()["y"], 1.5 * t, rtol=1e-12)
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["x"], (1.5 * (1 - t**2)) @ W.T, rtol=1e-12)
    assert float(tf.saved_model.load(folder).inner.s.numpy()) == 1.5


def test_saved_model_errors(saved_module):
    folder, _ = saved_module
    run = gradcli("check", folder)
    assert run.exit_code == 2, run
    assert "needs its data as --input NAME=VALUE (inputs: x [None, 3] float64)" in run.stdout + run.stderr
    run = gradcli("vjp", folder + ":predict", "--input", "x=[[1, 2, 3]]")
    assert run.exit_code == 2, run
    assert "no signature or function 'predict' (known: serving_default, __call__)" in run.stderr
    run = gradcli("vjp", folder, "--input", "x=[1, 2, 3]")
    assert run.exit_code == 2, run
    assert "--input x has shape [3], the SavedModel expects [None, 3]" in run.stderr


def test_keras_export_names_weights_like_a_keras_file(tmp_path):
    """A Keras ``model.export`` folder: float32 graph, weights named dense/kernel.
    Closed form for y = x W + b seeded with ones: dW = x^T 1, db = batch size."""
    import keras

    x = keras.Input((3,), name="x")
    layer = keras.layers.Dense(2, name="dense")
    network = keras.Model(x, layer(x))
    layer.set_weights([W.astype("float32"), B.astype("float32")])
    network.export(str(tmp_path / "exported"), verbose=False)
    run = gradcli("vjp", tmp_path / "exported", "--input", f"x={X.tolist()}", "--json")
    assert run.exit_code == 0, run
    grads = {g["name"]: g for g in run.result["gradients"]}
    assert list(grads) == ["dense/kernel", "dense/bias"] and grads["dense/kernel"]["dtype"] == "float32"
    np.testing.assert_allclose(grads["dense/kernel"]["values"], X.T @ np.ones((4, 2)), rtol=1e-6)
    np.testing.assert_allclose(grads["dense/bias"]["values"], [4.0, 4.0], rtol=1e-6)
    assert any("fixed dtypes: checking in float32" in n for n in run.result["notes"])


def test_keras_file_works_with_check(tmp_path):
    import keras

    x = keras.Input((3,), name="x")
    layer = keras.layers.Dense(2, activation="tanh", name="dense")
    network = keras.Model(x, layer(x))
    path = tmp_path / "tanh.keras"
    network.save(path)
    run = gradcli("check", path, "--input", f"x={X.tolist()}", "--json")
    assert run.exit_code == 0, run
    assert set(by_input(run.result)) == {"dense/kernel", "dense/bias", "x"}  # weights and data by default
    run = gradcli("check", path)
    assert run.exit_code == 2, run
    assert "a .keras model needs its data as --input NAME=VALUE (inputs: x)" in run.stdout + run.stderr
    # --set's value rules hold for --input: integers are numbers, booleans are not.
    run = gradcli("check", path, "--input", "x=[[1, 0, 2]]", "--json")
    assert run.exit_code == 0, run
    run = gradcli("check", path, "--input", "x=[[true, false, true]]")
    assert run.exit_code == 2, run
    assert "--input x: booleans are not numbers (float32 expected)" in run.stdout + run.stderr
    run = gradcli("check", sample("square.py"), "--input", "x=1")
    assert run.exit_code == 2, run
    assert "to change a model file's inputs use --set" in run.stdout + run.stderr


# --- 4. --native-dtype for the inspection commands ---------------------------------------


def test_native_dtype_weight_norms_are_the_float32_ones_training_sees():
    """Reference: the same network in float32, its gradient taken by a GradientTape
    over the trainable variables, as a training step would."""
    import keras
    import tensorflow as tf

    from gradcli.model.loading import load_model

    point = load_model(sample("keras_mlp.py"), native_dtype=True).point
    assert point["dense/kernel"].dtype == np.float32
    reference = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(2)])
    names = ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    reference.set_weights([point[n] for n in names])
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(reference(point["x"]))
    expected = {n: g.numpy() for n, g in zip(names, tape.gradient(total, reference.trainable_variables))}

    run = gradcli("vjp", sample("keras_mlp.py"), "--native-dtype", "--json")
    assert run.exit_code == 0, run
    assert run.result["dtype"] == "float32"
    rows = {w["name"]: w for w in run.result["weights"]}
    for name in names:
        assert rows[name]["gradient_norm"] == pytest.approx(float(np.linalg.norm(expected[name])), rel=1e-6)
    run = gradcli("jacobian", sample("keras_mlp.py"), "--native-dtype", "--wrt", "dense_1/bias", "--json")
    assert run.exit_code == 0, run
    assert run.result["dtype"] == "float32"
    # d output[i, j] / d bias[k] = [j == k]: a closed form in any dtype
    (block,) = run.result["blocks"]
    np.testing.assert_array_equal(np.asarray(block["values"]), np.broadcast_to(np.eye(2), (3, 2, 2)))


# --- 2. weights of the file's own layers, tf.Modules and tf.Variables ------------------

MODULE_WEIGHTS = fixture("module_weights.py")


def test_plain_callable_exposes_module_weights_by_path():
    """Closed form, cotangent ones: y = s (t w + o), t = tanh(x K + c):
    dy/ds = sum(t w + o), dy/dw = s t^T 1, dy/do = s N, dz = s (1 - t**2) w^T,
    dK = x^T dz, dc = sum(dz), dx = dz K^T."""
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    model = load_model(MODULE_WEIGHTS)
    assert model.wrt == ["dense/kernel", "dense/bias", "linear/w", "linear/offsets/0", "scale", "x"]
    p = model.point
    x, k, c, w = p["x"], p["dense/kernel"], p["dense/bias"], p["linear/w"]
    t = np.tanh(x @ k + c)
    d_z = 2.0 * (1 - t**2) * w.T
    expected = {
        "scale": np.sum(t @ w + 0.25), "linear/w": 2.0 * t.sum(axis=0)[:, None],
        "linear/offsets/0": 2.0 * len(x), "dense/kernel": x.T @ d_z,
        "dense/bias": d_z.sum(axis=0), "x": d_z @ k.T,
    }
    grads = inspection.vjp(model).arrays()
    for name, value in expected.items():
        np.testing.assert_allclose(grads[name], value, rtol=1e-12, err_msg=name)
    shifted = dict(p, scale=np.float64(-1.0), **{"linear/w": np.zeros((3, 1))})
    np.testing.assert_allclose(model.call(shifted)["output"], np.full((3, 1), -0.25), rtol=1e-12)
    # nothing was assigned: the file's objects hold their own values again
    assert isinstance(model.module.linear.w, tf_variable()) and float(model.module.scale.numpy()) == 2.0
    np.testing.assert_array_equal(model.module.linear.w.numpy(), [[1.0], [-2.0], [0.5]])


def tf_variable():
    import tensorflow as tf

    return tf.Variable


def test_wrt_names_a_module_weight_on_the_command_line():
    run = gradcli("check", MODULE_WEIGHTS, "--wrt", "dense/kernel,linear/offsets/0", "--json")
    assert run.exit_code == 0, run
    assert set(by_input(run.result)) == {"dense/kernel", "linear/offsets/0"}
    run = gradcli("check", MODULE_WEIGHTS, "--wrt", "dense/kernal")
    assert run.exit_code == 2, run
    assert "unknown input 'dense/kernal' (known: dense/kernel, dense/bias, linear/w" in run.stdout + run.stderr


def float32_layer_module():
    import keras

    layer = keras.layers.Dense(2, name="dense")
    layer.build((None, 3))
    layer.set_weights([W.astype("float32"), B.astype("float32")])
    module = types.ModuleType("float32_layer")
    module.layer = layer
    module.model = lambda x: layer(x) ** 2
    module.inputs = {"x": X}
    return module


def test_float32_keras_layer_in_a_function_is_checked_in_float64():
    """Closed form for y = (x W + b)**2, cotangent ones: dW = x^T 2 (x W + b).
    Agreement to 1e-12 shows the layer computed in float64 (float32 would be
    off by about 1e-7); --native-dtype gives the float32 numbers."""
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    w32, b32 = W.astype("float32").astype(np.float64), B.astype("float32").astype(np.float64)
    z = X @ w32 + b32
    model = load_model(float32_layer_module())
    assert model.wrt == ["dense/kernel", "dense/bias", "x"] and model.dtype == np.float64
    assert any("promoted dense/kernel, dense/bias from float32 to float64" in n for n in model.notes)
    x_shift = X + 1e-9  # a change far below float32's resolution must show
    np.testing.assert_allclose(model.call(dict(model.point, x=x_shift))["output"], (x_shift @ w32 + b32) ** 2, rtol=1e-13)
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["dense/kernel"], X.T @ (2 * z), rtol=1e-12)
    native = load_model(float32_layer_module(), native_dtype=True)
    assert native.dtype == np.float32 and native.outputs["output"].dtype == np.float32
    assert model.module.layer.dtype_policy.name == "float32"  # restored after each call


def test_weight_read_where_gradcli_cannot_vary_it_is_an_error():
    """A tf.Module whose traced method lives outside the model file: its trace
    captured the variable, so substituting it would silently change nothing."""
    import tensorflow as tf

    from gradcli.model.loading import load_model

    class Traced(tf.Module):
        def __init__(self):
            super().__init__(name="traced")
            self.w = tf.Variable(3.0, dtype=tf.float64)

        @tf.function
        def __call__(self, x):
            return self.w * x

    module = types.ModuleType("elsewhere")
    module.model, module.inputs = Traced(), {"x": np.array([1.0, 2.0])}
    with pytest.raises(ModelError) as raised:
        load_model(module)
    assert "reads traced/w in a way gradcli cannot vary" in str(raised.value)


def test_saved_model_with_a_custom_gradient_is_refused_not_checked_wrongly(tmp_path):
    """Its saved gradient function cannot serve the re-imported graph; dropping
    it would check the forward ops' derivative and could pass a wrong gradient."""
    import tensorflow as tf

    @tf.custom_gradient
    def softsign(z):
        return z / (1.0 + tf.abs(z)), lambda upstream: upstream / (1.0 + tf.abs(z))

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.eye(2))

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float64, name="x")])
        def __call__(self, x):
            return softsign(x @ self.w)

    tf.saved_model.save(Module(), str(tmp_path / "custom"))
    run = gradcli("check", tmp_path / "custom", "--input", "x=[[1.0, 2.0]]")
    assert run.exit_code == 3, run
    assert "the SavedModel uses tf.custom_gradient" in run.stderr


def test_a_subclassed_model_whose_call_takes_no_training_argument_is_checked():
    """The gradient of y = tanh(x W + b) v against its closed form
    dy/dW[i, j] = sum_rows x[r, i] (1 - tanh(z[r, j])^2) v[j], in float64."""
    from gradcli.analyses.check import check_model
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff
    from gradcli.options import CheckOptions

    model = load_model(fixture("keras_call_without_training.py"))
    assert str(model.dtype) == "float64"
    result = check_model(model, CheckOptions(mode="full"))
    assert not result.failed and all(p.verdict == "pass" for p in result.pairs)
    p = model.point
    kernel, bias, head = model.weights  # the Dense layers' variables, in order
    x, w, b, v = p["x"], p[kernel], p[bias], p[head]
    z = np.tanh(x @ w + b)
    (output,) = model.outputs
    grads = autodiff.vjp(model.function, p, [kernel], {output: np.ones((2, 1))})
    np.testing.assert_allclose(grads[kernel], x.T @ ((1 - z**2) * v[:, 0]), rtol=1e-12)


# --- 5. a Keras layer's input gradient, checked by default ---------------------------------

INPUT_RIGHT = fixture("keras_input_gradient.py")
INPUT_WRONG = fixture("keras_input_gradient_wrong.py")
ACTIVATION_RIGHT = fixture("keras_activation.py")
ACTIVATION_WRONG = fixture("keras_activation_wrong.py")
SCALE_W = np.array([0.5, -1.5, 2.0])
SCALE_X = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.8]], dtype=np.float32).astype(np.float64)
SWISH_X = np.array([[-1.5, -0.2, 0.4, 2.0], [0.7, -0.9, 1.3, 0.1]], dtype=np.float32).astype(np.float64)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _swish_derivative(x):
    s = _sigmoid(x)
    return s * (1 + x * (1 - s))


def test_a_layers_input_gradient_one_percent_off_fails_naming_x():
    """y = x * w + b: d y[i, j] / d x[i, j] = w[j]; the layer's gradient gives
    1.01 w[j], its weight gradients are right."""
    run = gradcli("check", INPUT_WRONG, "--json")
    assert run.exit_code == 1, run
    pairs = by_input(run.result)
    assert list(pairs) == ["scale/w", "scale/b", "x"]
    assert {n for n, p in pairs.items() if p["failed"]} == {"x"}
    pair = pairs["x"]
    assert pair["verdict"] == "mismatch" and pair["n_failing"] == 6  # the 6 diagonal elements
    for element in pair["failing"]:
        (i, j), (k, m) = element["output_index"], element["input_index"]
        assert (i, j) == (k, m)
        assert element["numeric"] == pytest.approx(SCALE_W[j], rel=1e-8)
        assert element["analytic"] == pytest.approx(1.01 * SCALE_W[j], rel=1e-12)
    assert pair["culprit"]["definition"] == f"{relative_path(INPUT_RIGHT)}:{line_of(INPUT_RIGHT, 'def scaled(')}"
    notes = run.result["models"][0]["notes"]
    assert "differentiated with respect to input x and 2 weights (every floating input and trainable weight; " \
        "`wrt` narrows)" in notes
    # `wrt` selects exactly what it lists
    run = gradcli("check", INPUT_WRONG, "--wrt", "scale/w", "--json")
    assert run.exit_code == 0, run  # the wrong input gradient is not asked for
    assert list(by_input(run.result)) == ["scale/w"]
    assert not any("differentiated with respect to" in n for n in run.result["models"][0]["notes"])


def test_the_same_layer_right_passes_with_its_closed_form():
    run = gradcli("check", INPUT_RIGHT, "--json")
    assert run.exit_code == 0, run
    pairs = by_input(run.result)
    assert list(pairs) == ["scale/w", "scale/b", "x"] and all(p["verdict"] == "pass" for p in pairs.values())
    worst = pairs["x"]["worst"]
    i, j = worst["output_index"]
    expected = SCALE_W[j] if [i, j] == worst["input_index"] else 0.0
    assert worst["analytic"] == pytest.approx(expected, abs=1e-12)
    assert worst["numeric"] == pytest.approx(expected, rel=1e-8, abs=1e-9)


def test_a_weightless_activation_layer_is_checked_by_its_input():
    """swish(x) = x s(x), s the sigmoid: derivative s (1 + x (1 - s)); the
    wrong layer's gradient is s alone. The layer itself is the model."""
    run = gradcli("check", ACTIVATION_RIGHT, "--json")
    assert run.exit_code == 0, run
    (pair,) = by_input(run.result).values()
    assert pair["input"] == "x" and pair["verdict"] == "pass"
    worst = pair["worst"]
    assert worst["output_index"] == worst["input_index"]
    assert worst["numeric"] == pytest.approx(_swish_derivative(SWISH_X[tuple(worst["input_index"])]), rel=1e-8)
    run = gradcli("check", ACTIVATION_WRONG, "--json")
    assert run.exit_code == 1, run
    (pair,) = by_input(run.result).values()
    assert pair["input"] == "x" and pair["verdict"] == "mismatch" and pair["n_failing"] == 8
    for element in pair["failing"]:
        x = SWISH_X[tuple(element["input_index"])]
        assert element["numeric"] == pytest.approx(_swish_derivative(x), rel=1e-8)
        assert element["analytic"] == pytest.approx(_sigmoid(x), rel=1e-12)
    assert pair["culprit"]["definition"] == (
        f"{relative_path(ACTIVATION_RIGHT)}:{line_of(ACTIVATION_RIGHT, 'def swish(')}"
    )


def test_the_proof_compares_input_gradients_with_the_users_own_layer():
    """The float64 rebuild of the layer has the right input gradient, the user's
    own layer (state set outside its config) 1.01 w[j]: only the input
    gradients differ, and the proof must see it and check the user's layer."""
    name = fixture("keras_input_gradient_unsaved.py")
    run = gradcli("check", name, "--json")
    assert run.exit_code == 1, run
    model = run.result["models"][0]
    assert any(n.startswith("the float64 rebuild of the Keras model computes another function (for x,")
               for n in model["notes"]), model["notes"]
    assert model["dtype"] == "float32"
    pair = by_input(run.result)["x"]
    assert pair["verdict"] == "mismatch"
    for element in pair["failing"]:
        j = element["input_index"][1]
        assert element["analytic"] == pytest.approx(1.01 * SCALE_W[j], rel=1e-6)
        assert element["numeric"] == pytest.approx(SCALE_W[j], rel=1e-3)


def test_assert_gradients_ok_checks_the_input_gradient_of_a_keras_model():
    from gradcli.model.loading import import_model_file
    from gradcli.testing import assert_gradients_ok

    wrong = import_model_file(INPUT_WRONG)  # the Keras model object, checked in this process

    with pytest.raises(AssertionError) as raised:
        assert_gradients_ok(wrong.model, inputs=wrong.inputs)
    assert "x -> output: mismatch" in str(raised.value)
    # The files in this process too: what is tested is the Keras input gradient;
    # that model files run in a worker is tests/test_plugin_isolation.py's (each
    # worker imports TensorFlow again: 4-5 s apiece).
    with pytest.raises(AssertionError) as raised:
        assert_gradients_ok(INPUT_WRONG, isolate=False)
    assert "x -> output: mismatch" in str(raised.value)
    assert_gradients_ok(INPUT_RIGHT, isolate=False)
    assert_gradients_ok([ACTIVATION_RIGHT], isolate=False)


def test_a_module_without_its_base_init_is_checked_with_its_weight_named_by_the_file():
    """Its ``name`` raises AttributeError (no ``super().__init__()``); it was an
    internal error. Closed form: y = sum(w x), dy/dw = x = [0.5, 1.5]."""
    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    model = load_model(fixture("module_without_init.py"))
    assert model.wrt == ["net/w", "x"]
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["net/w"], [0.5, 1.5], rtol=1e-15)
    np.testing.assert_allclose(grads["x"], [1.0, -2.0], rtol=1e-15)
    run = gradcli("check", fixture("module_without_init.py"))
    assert run.exit_code == 0, run
