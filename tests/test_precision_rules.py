"""Precision of a check: the dtype whose steps and tolerances a check uses comes
from the tensors that carry the differentiated values, never from plumbing
beside them; a note that lowers it names the op.

Truth is independent of gradcli: closed-form derivatives (numpy, float64) from
the fixture files' docstrings, source lines read from the fixture files.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import check_json, fixture, line_of as source_line, only_model


def checked(name: str, *options: str):
    """``check_json`` of the fixture ``name``."""
    return check_json(fixture(name), *options)


def pair(doc, input_name="x", output="output"):
    return next(p for p in only_model(doc)["pairs"] if (p["input"], p["output"]) == (input_name, output))


def line_of(name: str, text: str) -> int:
    return source_line(fixture(name), text)


def lowered_notes(model):
    return [n for n in model["notes"] if "computes in" in n]


def assert_float64_rules(model):
    assert model["dtype"] == "float64"
    assert model["tolerance"]["rtol"] == pytest.approx(1e-6)
    assert lowered_notes(model) == [], model["notes"]


# -- plumbing beside the values never lowers the precision ---------------------


def test_recompute_grad_float64_model_keeps_float64_rules_and_passes():
    run, doc = checked("prec_rule_recompute.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    x = np.array([0.3, -1.2, 2.0, 0.7])
    g = np.sin(x) * np.exp(x / 2)
    truth = 2 * g * (np.cos(x) + np.sin(x) / 2) * np.exp(x / 2)
    worst = pair(doc)["worst"]
    i = worst["input_index"][0]
    assert worst["analytic"] == pytest.approx(truth[i], rel=1e-12)
    assert worst["numeric"] == pytest.approx(truth[i], rel=1e-8)


def test_a_3e_4_error_inside_recompute_grad_fails_at_float64_rules():
    run, doc = checked("prec_rule_recompute_bad.py")
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert_float64_rules(model)
    p = pair(doc)
    assert p["verdict"] == "mismatch"
    x = np.array([0.3, -1.2, 2.0, 0.7])
    assert len(p["failing"]) == 4
    for element in p["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(2 * np.cos(x[i]), rel=1e-8)
        assert element["analytic"] == pytest.approx(2 * np.cos(x[i]) * (1 + 3e-4), rel=1e-12)


def test_seeded_random_shape_size_and_counter_in_float32_keep_float64_rules():
    run, doc = checked("prec_rule_plumbing.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    import tensorflow as tf

    x = np.array([0.3, -1.2, 2.0, 0.7, 1.1])
    noise = tf.random.stateless_normal([5], seed=(4, 2), dtype=tf.float32).numpy().astype(float)
    w = np.arange(5, dtype=np.float32) / np.float32(5)
    scale = ((np.float32(1) + noise.astype(np.float32) / np.float32(10)) * (np.float32(1) + w)).astype(float)
    truth = np.cos(x) * scale + 6 * x
    worst = pair(doc)["worst"]
    i = worst["input_index"][0]
    assert worst["analytic"] == pytest.approx(truth[i], rel=1e-12)
    assert worst["numeric"] == pytest.approx(truth[i], rel=1e-8)


def test_float32_constants_in_a_custom_gradient_keep_float64_rules():
    run, doc = checked("prec_rule_gradient_constants.py")
    assert run.exit_code == 0, run
    assert_float64_rules(only_model(doc))
    x = np.array([0.4, -1.3, 2.2])
    worst = pair(doc)["worst"]
    assert worst["analytic"] == pytest.approx(x[worst["input_index"][0]] ** 2, rel=1e-12)


def test_a_3e_4_error_from_float32_gradient_constants_fails():
    run, doc = checked("prec_rule_gradient_constants_bad.py")
    assert run.exit_code == 1, run
    assert_float64_rules(only_model(doc))
    p = pair(doc)
    assert p["verdict"] == "mismatch"
    x = np.array([0.4, -1.3, 2.2])
    for element in p["failing"]:
        i = element["input_index"][0]
        assert element["numeric"] == pytest.approx(x[i] ** 2, rel=1e-8)
        assert element["analytic"] / x[i] ** 2 - 1 == pytest.approx(3e-4, rel=1e-3)


# -- a genuine cast on the path lowers it, and the note names the op -----------


def test_a_cast_on_the_path_gets_float32_rules_and_the_note_names_the_cast():
    name = "prec_rule_cast.py"
    run, doc = checked(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = lowered_notes(model)
    line = line_of(name, "low = tf.cast(x, tf.float32)")
    assert f"Cast at tests/models/{name}:{line} (op Cast)" in note
    assert "op unknown" not in note
    x = np.array([0.5, -1.5, 1.25])
    worst = pair(doc)["worst"]
    assert worst["numeric"] == pytest.approx(3 * x[worst["input_index"][0]] ** 2, rel=1e-4)


# -- a gradient that raises in float64 falls back to the model's own dtype -----


def resize_truth():
    """R^T R img for the lanczos3 resize R (linear), R built column by column
    from the forward resize of unit images in float64 (no gradient involved)."""
    import tensorflow as tf

    img = np.linspace(-1.0, 1.0, 30, dtype=np.float32).reshape(1, 5, 6, 1).astype(float)
    basis = np.eye(30).reshape(30, 5, 6, 1)
    columns = tf.image.resize(tf.constant(basis), (3, 4), method="lanczos3").numpy().reshape(30, 12)
    r = columns.T  # [12, 30]
    return (r.T @ r @ img.reshape(30)).reshape(5, 6)


def test_a_float32_only_gradient_falls_back_to_the_native_dtype_with_a_note():
    name = "prec_rule_resize.py"
    run, doc = checked(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = [n for n in model["notes"] if "gradient does not run in float64" in n]
    line = line_of(name, "small = tf.image.resize(")
    assert f"ScaleAndTranslate 'resize/ScaleAndTranslate' at tests/models/{name}:{line}" in note
    assert "ScaleAndTranslateGrad" in note
    truth = resize_truth()
    worst = pair(doc, "img")["worst"]
    _, i, j, _ = worst["input_index"]
    assert worst["analytic"] == pytest.approx(truth[i, j], rel=1e-4, abs=1e-5)
    assert worst["numeric"] == pytest.approx(truth[i, j], rel=2e-3, abs=1e-4)


def test_a_wrong_gradient_beside_a_float32_only_gradient_still_fails():
    run, doc = checked("prec_rule_resize_bad.py")
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    assert any("gradient does not run in float64" in n for n in model["notes"])
    p = pair(doc, "img")
    assert p["verdict"] == "mismatch"
    truth = resize_truth()
    for element in p["failing"]:
        _, i, j, _ = element["input_index"]
        assert element["analytic"] == pytest.approx(1.02 * truth[i, j], rel=1e-4, abs=1e-5)
        assert element["numeric"] == pytest.approx(truth[i, j], rel=2e-3, abs=1e-4)


# -- Keras models with sublayers rebuild in float64 ----------------------------


def fixture_module(name: str):
    """The fixture file imported here, for its Keras weights (seeded in the file)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"prec_rule_{name[:-3]}", fixture(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def complex_step(forward, weights, key, output_index, input_index, h=1e-30):
    """d forward(weights)[output_index] / d weights[key][input_index], exact to
    float64 round-off (complex step: no subtraction, no step error)."""
    moved = {k: np.asarray(v, dtype=complex) for k, v in weights.items()}
    moved[key][tuple(input_index)] += 1j * h
    return float(np.imag(forward(moved)[tuple(output_index)]) / h)


def attention_reference(module):
    """MultiHeadAttention (2 heads, key_dim 3), x + attention, LayerNormalization,
    Dense, written in numpy from Keras's definitions. Keras holds the score
    scale 1/sqrt(key_dim) as a float32 constant (cast to the compute dtype):
    a constant of the function, so the reference uses the same one."""
    import keras

    keras_model = module.model
    mha = next(l for l in keras_model.layers if isinstance(l, keras.layers.MultiHeadAttention))
    norm = next(l for l in keras_model.layers if isinstance(l, keras.layers.LayerNormalization))
    dense = next(l for l in keras_model.layers if isinstance(l, keras.layers.Dense))
    weights = {}
    for part, sub in (("query", mha._query_dense), ("key", mha._key_dense),
                      ("value", mha._value_dense), ("attention_output", mha._output_dense)):
        weights[f"{part}/kernel"] = np.asarray(sub.kernel.numpy(), dtype=float)
        weights[f"{part}/bias"] = np.asarray(sub.bias.numpy(), dtype=float)
    weights["layer_normalization/gamma"] = np.asarray(norm.gamma.numpy(), dtype=float)
    weights["layer_normalization/beta"] = np.asarray(norm.beta.numpy(), dtype=float)
    weights["dense/kernel"] = np.asarray(dense.kernel.numpy(), dtype=float)
    weights["dense/bias"] = np.asarray(dense.bias.numpy(), dtype=float)
    x = np.asarray(module.inputs["x"], dtype=float)
    epsilon = norm.epsilon
    scale = float(np.float32(1 / np.sqrt(3.0)))

    def forward(w):
        q = np.einsum("btd,dnk->btnk", x, w["query/kernel"]) + w["query/bias"]
        k = np.einsum("bsd,dnk->bsnk", x, w["key/kernel"]) + w["key/bias"]
        v = np.einsum("bsd,dnk->bsnk", x, w["value/kernel"]) + w["value/bias"]
        scores = np.einsum("bsnk,btnk->bnts", k, q * scale)
        probs = np.exp(scores - scores.real.max(axis=-1, keepdims=True))
        probs = probs / probs.sum(axis=-1, keepdims=True)
        heads = np.einsum("bnts,bsnk->btnk", probs, v)
        out = np.einsum("btnk,nkd->btd", heads, w["attention_output/kernel"]) + w["attention_output/bias"]
        r = x + out
        mean = r.mean(axis=-1, keepdims=True)
        var = ((r - mean) ** 2).mean(axis=-1, keepdims=True)
        n = (r - mean) / np.sqrt(var + epsilon) * w["layer_normalization/gamma"] + w["layer_normalization/beta"]
        return n @ w["dense/kernel"] + w["dense/bias"]

    return forward, weights


@pytest.fixture(scope="module")
def attention():
    return attention_reference(fixture_module("prec_rule_keras_attention.py"))


def test_a_multi_head_attention_block_rebuilds_in_float64_and_passes(attention):
    run, doc = checked("prec_rule_keras_attention.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float64" and model["tolerance"]["rtol"] == pytest.approx(1e-6)
    assert not any("could not rebuild" in n or "computes in" in n for n in model["notes"]), model["notes"]
    forward, weights = attention
    assert {p["input"] for p in model["pairs"]} == set(weights) | {"x"}  # the data x too, by default
    assert pair(doc, "x")["verdict"] == "pass" and pair(doc, "x")["max_abs_error"] < 1e-8
    for key in ("query/kernel", "key/kernel", "value/kernel", "layer_normalization/gamma"):
        worst = pair(doc, key)["worst"]
        truth = complex_step(forward, weights, key, worst["output_index"], worst["input_index"])
        assert worst["analytic"] == pytest.approx(truth, rel=1e-10, abs=1e-12)
        assert worst["numeric"] == pytest.approx(truth, rel=1e-7, abs=1e-9)


def test_a_3e_4_error_in_an_attention_softmax_gradient_fails_in_float64():
    name = "prec_rule_keras_attention_bad.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert model["dtype"] == "float64"
    assert not any("could not rebuild" in n for n in model["notes"]), model["notes"]
    forward, weights = attention_reference(fixture_module(name))
    for key in ("query/kernel", "key/kernel"):
        p = pair(doc, key)
        assert p["verdict"] == "mismatch"
        for element in p["failing"][:3]:
            truth = complex_step(forward, weights, key, element["output_index"], element["input_index"])
            assert element["numeric"] == pytest.approx(truth, rel=1e-7)
            assert element["analytic"] == pytest.approx(truth * 1.0003, rel=1e-8)


def test_nested_models_shared_layers_and_batch_norm_rebuild_in_float64():
    name = "prec_rule_keras_nested.py"
    run, doc = checked(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float64"
    assert not any("could not rebuild" in n or "computes in" in n for n in model["notes"]), model["notes"]
    module = fixture_module(name)
    import keras

    layers = {l.name: l for l in module.model.layers}
    inner_dense = next(l for l in layers["inner"].layers if isinstance(l, keras.layers.Dense))
    norm = layers["norm"]
    w = {
        "shared/kernel": layers["shared"].kernel, "shared/bias": layers["shared"].bias,
        "dense/kernel": inner_dense.kernel, "dense/bias": inner_dense.bias,
        "norm/gamma": norm.gamma, "norm/beta": norm.beta,
        "head/kernel": layers["head"].kernel, "head/bias": layers["head"].bias,
    }
    weights = {k: np.asarray(v.numpy(), dtype=float) for k, v in w.items()}
    mean, var = (np.asarray(v.numpy(), dtype=float) for v in (norm.moving_mean, norm.moving_variance))
    x = np.asarray(module.inputs["x"], dtype=float)

    def forward(p):
        h = x @ p["shared/kernel"] + p["shared/bias"]
        h = h @ p["shared/kernel"] + p["shared/bias"]
        g = np.tanh(h @ p["dense/kernel"] + p["dense/bias"])
        n = (g - mean) / np.sqrt(var + norm.epsilon) * p["norm/gamma"] + p["norm/beta"]
        return n @ p["head/kernel"] + p["head/bias"]

    assert {p["input"] for p in only_model(doc)["pairs"]} == set(weights) | {"x"}  # the data x too, by default
    assert pair(doc, "x")["verdict"] == "pass" and pair(doc, "x")["max_abs_error"] < 1e-8
    for key in weights:
        worst = pair(doc, key)["worst"]
        truth = complex_step(forward, weights, key, worst["output_index"], worst["input_index"])
        assert worst["analytic"] == pytest.approx(truth, rel=1e-10, abs=1e-12)
