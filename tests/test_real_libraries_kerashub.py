"""Models of real libraries, built from their constructors with tiny configs (no
weights downloaded), and the two weight problems they showed (issue 35):

* weights that share a variable path: keras-hub's ``T5Backbone`` holds two
  distinct variables at ``self_attention/embeddings``; every weight gets a name
  of its own by one rule (docs/model-files.md, "Weight names"), and one
  variable held twice stays one weight;
* weights the check is not asked about: a masked autoregressive flow
  (tensorflow_probability) whose tf_keras network gradcli cannot vary is
  checked by the inputs ``wrt`` names, and refused only for a weight it names.

Numbers are checked against closed forms and against central differences
computed here in float64 (a float64 T5Backbone holding the same weights),
never against gradcli's own output. Each keras-hub model is built once.
"""

from __future__ import annotations

import importlib.util
import types
from collections import Counter

import numpy as np
import pytest

import gradcli as api
from gradcli.errors import ModelError
from gradcli.model.paths import relative_path
from tests.conftest import error_line, fixture, gradcli

#: One worker runs this module: its module-scoped fixture is costly (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

SAME_PATH = fixture("hub_same_path.py")
SAME_PATH_WRONG = fixture("hub_same_path_wrong.py")
TIED = fixture("hub_tied_weights.py")
MAF = fixture("tfp_maf_keras_network.py")
SHARED_BIAS = "self_attention/embeddings"  # the path T5's two relative position biases share


def numbered_by_rule(paths: list[str]) -> list[str]:
    """The names docs/model-files.md gives weights whose short names clash:
    whole paths, those several weights share numbered from 0 in order (``-N``)."""
    counts, seen, names = Counter(paths), Counter(), []
    for path in paths:
        if counts[path] == 1:
            names.append(path)
        else:
            names.append(f"{path}-{seen[path]}")
            seen[path] += 1
    return names


# --- keras-hub's T5Backbone ----------------------------------------------------------


@pytest.fixture(scope="module")
def t5():
    """tests/models/hub_t5_tiny.py, imported once: its ``model``, ``inputs`` and ``wrt``."""
    pytest.importorskip("keras_hub")
    spec = importlib.util.spec_from_file_location("hub_t5_tiny_once", fixture("hub_t5_tiny.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def t5_cotangents(t5):
    outputs = t5.model(t5.inputs)
    rng = np.random.default_rng(35)
    return {name: rng.standard_normal(tuple(value.shape)) for name, value in outputs.items()}


@pytest.fixture(scope="module")
def t5_vjp(t5, t5_cotangents):
    """gradcli's J^T c of the tiny T5 with respect to every weight (the default)."""
    return api.vjp(t5.model, t5.inputs, t5_cotangents)


def test_t5_weights_are_named_uniquely_by_the_documented_rule(t5, t5_vjp):
    variables = list(t5.model.trainable_variables)
    paths = [v.path for v in variables]
    assert Counter(paths)[SHARED_BIAS] == 2  # the library's two variables at one path
    short = ["/".join(p.split("/")[1:]) if p.count("/") >= 2 else p for p in paths]
    assert len(set(short)) < len(short)  # rule 2: short names clash, whole paths are used
    names = [g.name for g in t5_vjp.gradients]  # every weight, a disconnected one too
    assert names == numbered_by_rule(paths)
    assert len(set(names)) == len(names) == len({id(v) for v in variables}) == 28
    assert f"{SHARED_BIAS}-0" in names and f"{SHARED_BIAS}-1" in names and SHARED_BIAS not in names
    # Tied embeddings (tie_embedding_weights=True): one variable, one weight.
    assert names.count("token_embedding/embeddings") == 1


def float64_twin(model):
    """The same T5Backbone computed in float64, holding the same weights."""
    import keras_hub

    config = dict(model.get_config(), dtype="float64")
    twin = keras_hub.models.T5Backbone.from_config(config)
    twin.set_weights(model.get_weights())
    return twin


def test_t5_numbered_weights_gradients_match_float64_central_differences(t5, t5_vjp, t5_cotangents):
    """<J^T c, d> by gradcli against (f(w + h d) - f(w - h d)) / 2h in float64,
    with f = sum over outputs of <c, output>, for each of the two weights that
    share a path (numbered in the order of ``trainable_variables``)."""
    twin = float64_twin(t5.model)
    shared = [v for v in twin.trainable_variables if v.path == SHARED_BIAS]
    # h = 1e-4: the difference's error is then ~1e-9 of the derivative (rounding grows as 1/h,
    # the h**2 term is below it), a tenth of the tolerance.
    rng, h = np.random.default_rng(7), 1e-4

    def f():
        outputs = twin(t5.inputs)
        return sum(float(np.sum(t5_cotangents[n] * np.asarray(outputs[n]))) for n in t5_cotangents)

    for number, variable in enumerate(shared):
        start = variable.numpy()
        direction = rng.standard_normal(start.shape)
        variable.assign(start + h * direction)
        up = f()
        variable.assign(start - h * direction)
        down = f()
        variable.assign(start)
        numeric = (up - down) / (2 * h)
        analytic = float(np.sum(t5_vjp.arrays()[f"{SHARED_BIAS}-{number}"] * direction))
        assert abs(numeric) > 1e-3  # the bias reaches the outputs: not a vacuous comparison
        np.testing.assert_allclose(analytic, numeric, rtol=1e-8)


def test_t5_check_of_the_numbered_weights_passes_through_the_python_api(t5):
    result = api.check(t5.model, t5.inputs, wrt=t5.wrt)
    assert result.ok, result
    (model,) = result.models
    verdicts = {(p.input, p.output): p.verdict for p in model.pairs}
    assert {i for i, _ in verdicts} == set(t5.wrt) == {f"{SHARED_BIAS}-0", f"{SHARED_BIAS}-1",
                                                       "encoder_output_layer_norm/weight"}
    # The decoder's bias (the second) never reaches the encoder's output; every other pair passes.
    assert verdicts.pop((f"{SHARED_BIAS}-1", "encoder_sequence_output")) == "disconnected"
    assert set(verdicts.values()) == {"pass"}


# --- two distinct weights at one path, written by hand --------------------------------


def same_path_weights():
    """The fixture's data and its two weights as the float32 variables hold them,
    in float64 (tests/models/_same_path.py; its constants read, nothing built)."""
    spec = importlib.util.spec_from_file_location("same_path_constants", fixture("_same_path.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    held = [np.float32(w).astype(np.float64) for w in (module.W0, module.W1)]
    return module.X, *held


def test_same_path_weights_get_numbered_names_and_closed_form_gradients():
    """y = x * w0 * w1 elementwise; with cotangent c: J^T c by w0 is sum_b c x w1,
    by w1 sum_b c x w0, by x c w0 w1."""
    x, w0, w1 = same_path_weights()
    c = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.5]])
    grads = api.vjp(SAME_PATH, cotangents={"output": c}).arrays()
    assert list(grads) == ["twice/scale/w-0", "twice/scale/w-1", "x"]
    np.testing.assert_allclose(grads["twice/scale/w-0"], np.sum(c * x * w1, axis=0), rtol=1e-12)
    np.testing.assert_allclose(grads["twice/scale/w-1"], np.sum(c * x * w0, axis=0), rtol=1e-12)
    np.testing.assert_allclose(grads["x"], c * w0 * w1, rtol=1e-12)
    assert api.check(SAME_PATH).ok


def test_wrong_gradient_of_one_same_path_weight_is_caught_and_named():
    x, w0, _ = same_path_weights()
    run = gradcli("check", SAME_PATH_WRONG, "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    pairs = {p["input"]: p for p in model["pairs"]}
    assert {n: p["verdict"] for n, p in pairs.items()} == {
        "twice/scale/w-0": "pass", "twice/scale/w-1": "mismatch", "x": "pass",
    }
    worst = pairs["twice/scale/w-1"]["worst"]
    (b, j), (k,) = worst["output_index"], worst["input_index"]
    assert j == k
    right = x[b, j] * w0[j]  # d y[b, j] / d w1[j]; the rule gives twice that
    np.testing.assert_allclose(worst["numeric"], right, rtol=1e-8)
    np.testing.assert_allclose(worst["analytic"], 2 * right, rtol=1e-12)


def test_wrt_naming_the_shared_path_is_refused_with_the_numbered_names():
    run = gradcli("check", SAME_PATH, "--wrt", "twice/scale/w")
    assert run.exit_code == 2, run
    assert error_line(run) == (
        "Error: --wrt: 'twice/scale/w' is the name of 2 distinct weights, numbered twice/scale/w-0, "
        "twice/scale/w-1: name the ones to differentiate"
    )


def test_a_variable_held_twice_is_one_weight_varied_everywhere():
    """y = w**2 a**2 x: the Keras weight w is read by two calls of one layer, the
    tf.Variable a at three places of one module (tests/models/hub_tied_weights.py)."""
    w, a = np.array([0.5, -1.25, 2.0]), np.array([1.5, 0.75, -0.5])
    x = np.array([1.0, -2.0, 0.5])
    grads = api.vjp(TIED).arrays()
    assert list(grads) == ["shared/w", "tied/a", "x"]
    np.testing.assert_allclose(grads["shared/w"], 2 * w * a**2 * x, rtol=1e-12)
    np.testing.assert_allclose(grads["tied/a"], 2 * a * w**2 * x, rtol=1e-12)
    np.testing.assert_allclose(grads["x"], w**2 * a**2, rtol=1e-12)
    # The function checked is the user's own: every place of a is varied at once.
    assert api.check(TIED).ok


# --- a tensorflow_probability flow whose network gradcli cannot vary ------------------


def test_maf_weights_outside_wrt_are_left_as_they_are_and_the_check_goes_on():
    pytest.importorskip("tensorflow_probability")
    run = gradcli("check", MAF, "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    assert {(p["input"], p["verdict"]) for p in model["pairs"]} == {("x", "pass"), ("y", "pass")}
    assert any("cannot vary" in note and note.endswith("left as they are") for note in model["notes"])


def test_maf_weight_asked_for_in_wrt_is_refused_by_name():
    pytest.importorskip("tensorflow_probability")
    kernel = "autoregressive_network/_network/layer_with_weights-0/kernel"
    run = gradcli("check", MAF, "--wrt", f"x,{kernel}")
    assert run.exit_code == 3, run
    assert error_line(run) == (
        f"Error: {relative_path(MAF)}: the model reads {kernel} in a way gradcli cannot vary "
        "(e.g. inside a tf.function defined elsewhere); pass the weights as inputs instead, or leave them "
        "out of `wrt`"
    )


def test_only_the_weight_gradcli_cannot_vary_is_left_out():
    """A model of two weights: ``traced/w`` read inside a tf.function of a class
    defined outside the model (its trace captured the variable: gradcli cannot
    vary it) and the global ``scale`` read directly. y = scale * w * x, so
    dy/dscale = w x and dy/dx = scale * w, with w at its own value."""
    import tensorflow as tf

    from gradcli.analyses import inspection
    from gradcli.model.loading import load_model

    class Traced(tf.Module):
        def __init__(self):
            super().__init__(name="traced")
            self.w = tf.Variable(np.array([3.0, -0.5]))

        @tf.function
        def __call__(self, x):
            return self.w * x

    def module():
        file = types.ModuleType("elsewhere")
        file.traced, file.scale = Traced(), tf.Variable(np.array([0.25, 2.0]))
        file.model = lambda x: file.scale * file.traced(x)
        file.inputs = {"x": np.array([1.5, -2.0])}
        return file

    with pytest.raises(ModelError) as raised:  # the default asks for every weight
        load_model(module())
    assert "reads traced/w in a way gradcli cannot vary" in str(raised.value)
    model = load_model(module(), wrt=["scale", "x"])
    assert model.weights == ["scale"] and model.unvaried == ["traced/w"]
    grads = inspection.vjp(model).arrays()
    np.testing.assert_allclose(grads["scale"], [3.0 * 1.5, -0.5 * -2.0], rtol=1e-15)
    np.testing.assert_allclose(grads["x"], [0.25 * 3.0, 2.0 * -0.5], rtol=1e-15)


def test_t5s_decoder_layer_is_resolved_in_the_layer_pass_beside_its_masked_position_bias():
    """T5's decoder layer returns its position bias with the causal mask folded
    in as -1e9, beside hidden states of size 1. The unit's scalar weighed those
    entries, and every input that does not move them (its query and key
    kernels, a layer norm) was inconclusive: error estimate 0.13 against
    derivatives of 2e-5 to 5e-4, 'check in float64' in a float64 check. Capped
    (``layers.local.outlier_weights``), every input of the layer passes, each
    resolved to round-off. (The pass alone: the whole model's check is another test's.)"""
    from gradcli.analyses.check import check_layers
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    layers, _ = check_layers(load_model(fixture("hub_t5_tiny.py")), CheckOptions(layers=["transformer_decoder_layer_0"]))
    (layer,) = layers
    assert layer.path == "t5_backbone/transformer_decoder_layer_0" and layer.verdict == "pass", layer
    assert len(layer.pairs) == 17 and all(p.verdict == "pass" for p in layer.pairs)
    assert max(p.fd_error for p in layer.pairs) < 1e-6, [(p.input, p.fd_error) for p in layer.pairs]
