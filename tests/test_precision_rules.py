"""Precision of a check: the dtype whose steps and tolerances a check uses comes
from the tensors that carry the differentiated values, never from plumbing
beside them; a note that lowers it names the op.

Truth is independent of gradcli: closed-form derivatives (numpy, float64) from
the fixture files' docstrings, source lines read from the fixture files.
"""

from __future__ import annotations


import os

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


# -- single precision reached through complex64 or inside a function body ------


def complex_fft_module():
    return fixture_module("_complex_fft.py")


def test_an_fft_in_complex64_inside_a_float64_model_gets_float32_rules_and_passes():
    """float64 straight to complex64 (no float32 cast in between): the FFT
    rounds as float32 does, so the check runs at float32 rules and the note
    names the cast; the numbers agree with the exact float64 Jacobian."""
    run, doc = checked("prec_complex_fft.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = lowered_notes(model)
    line = line_of("_complex_fft.py", "spectrum = tf.signal.fft(tf.cast(v, tf.complex64))")
    assert f"Cast at tests/models/_complex_fft.py:{line} (op Cast)" in note
    fft = complex_fft_module()
    truth = fft.jacobian(fft.X)
    p = pair(doc)
    assert p["verdict"] == "pass"
    worst = p["worst"]
    expected = truth[worst["output_index"][0], worst["input_index"][0]]
    assert worst["analytic"] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert worst["numeric"] == pytest.approx(expected, rel=1e-3, abs=1e-5)


def test_a_custom_gradient_2_percent_off_behind_the_complex64_fft_fails_with_its_culprit():
    name = "prec_complex_fft_wrong.py"
    run, doc = checked(name)
    assert run.exit_code == 1, run
    model = only_model(doc)
    assert model["dtype"] == "float32"
    p = pair(doc)
    assert p["verdict"] == "mismatch"
    fft = complex_fft_module()
    truth = fft.jacobian(fft.X)
    custom = truth - np.eye(fft.N) / 4.0  # the part the custom gradient computes
    assert p["failing"]
    for element in p["failing"]:
        k, n = element["output_index"][0], element["input_index"][0]
        assert element["numeric"] == pytest.approx(truth[k, n], rel=1e-3, abs=1e-5)
        assert element["analytic"] == pytest.approx(truth[k, n] + 0.02 * custom[k, n], rel=1e-5, abs=1e-6)
    culprit = p["culprit"]
    assert culprit["site"]["description"] == "tf.custom_gradient mix"
    assert culprit["definition"] == f"tests/models/_complex_fft.py:{line_of('_complex_fft.py', 'def mix(')}"
    assert culprit["rel_error"] == pytest.approx(0.02 / 1.02, rel=0.05)


def test_a_float32_cast_inside_a_while_loop_body_gets_float32_rules_and_passes():
    name = "prec_while_float32.py"
    run, doc = checked(name)
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    (note,) = lowered_notes(model)
    line = line_of(name, "tf.while_loop(")
    assert f"Cast inside StatelessWhile at tests/models/{name}:{line}" in note
    a, slope = np.array([0.3, -1.2, 0.7]), np.ones(3)
    for _ in range(3):
        slope *= np.cos(a) + 0.5
        a = np.sin(a) + a / 2
    p = pair(doc)
    assert p["verdict"] == "pass"
    for element in [p["worst"]]:
        i = element["input_index"][0]
        assert element["analytic"] == pytest.approx(slope[i], rel=1e-5)
        assert element["numeric"] == pytest.approx(slope[i], rel=1e-3)


def fnet_reference(layer, x):
    """keras-hub's FNetEncoder written in numpy from its definition, exact in
    float64 and usable with complex x for the complex step: the real part of
    the 2-D FFT over (sequence, feature) as the real-linear map
    Re FFT2(x) = Cs x Cf^T - Ss x Sf^T, x + that, LayerNormalization, a relu
    Dense, a Dense, the residual sum and LayerNormalization (dropout is off)."""
    def weights(v):
        return np.asarray(v.numpy(), dtype=float)

    def norm(v, sub):
        mean = v.mean(axis=-1, keepdims=True)
        var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
        return (v - mean) / np.sqrt(var + sub.epsilon) * weights(sub.gamma) + weights(sub.beta)

    s, f = x.shape[-2:]
    ks, kf = np.arange(s), np.arange(f)
    cs, ss = np.cos(2 * np.pi * np.outer(ks, ks) / s), np.sin(2 * np.pi * np.outer(ks, ks) / s)
    cf, sf = np.cos(2 * np.pi * np.outer(kf, kf) / f), np.sin(2 * np.pi * np.outer(kf, kf) / f)
    mixed = cs @ x @ cf.T - ss @ x @ sf.T
    first = norm(x + mixed, layer._mixing_layer_norm)
    dense1, dense2 = layer._intermediate_dense, layer._output_dense
    pre = first @ weights(dense1.kernel) + weights(dense1.bias)
    hidden = np.where(pre.real > 0, pre, 0.0)
    out = hidden @ weights(dense2.kernel) + weights(dense2.bias)
    return norm(first + out, layer._output_layer_norm)


def test_keras_hub_fnet_encoder_keeps_float64_through_its_float32_cast_and_passes():
    """Issue 35: FNetEncoder casts to float32 before its FFT ("FFT transforms
    do not support float16": at least float32), which used to put the whole
    float64 check at float32 rules. The cast keeps float64 in the float64
    check (``keras_float64.float32_casts_kept``), and the note names it by
    keras-hub's own line: float64 rules, a pass, and analytic and numeric
    values that agree with a float64 re-implementation differentiated by the
    complex step."""
    keras_hub = pytest.importorskip("keras_hub")
    run, doc = checked("prec_fnet_encoder.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    source = os.path.join(os.path.dirname(keras_hub.__file__), "src", "layers", "modeling", "f_net_encoder.py")
    cast = source_line(source, 'ops.cast(input, "float32")')
    (note,) = [n for n in model["notes"] if n.startswith("kept float64 where the model casts to float32")]
    assert f"(f_net_encoder.py:{cast})" in note, note
    module = fixture_module("prec_fnet_encoder.py")
    x = np.asarray(module.inputs["x"], dtype=float)[0]
    p = pair(doc)
    assert p["verdict"] == "pass"
    worst = p["worst"]
    (_, i, j), (_, k, l) = worst["input_index"], worst["output_index"]
    moved = x.astype(complex)
    moved[i, j] += 1e-30j
    truth = float(np.imag(fnet_reference(module.model, moved)[k, l]) / 1e-30)
    assert worst["analytic"] == pytest.approx(truth, rel=1e-5, abs=1e-6)
    assert worst["numeric"] == pytest.approx(truth, rel=1e-3, abs=5e-5)


def test_a_keras_float32_cast_keeps_float64_in_the_check_and_only_there():
    """keras_cast_float32.py's norm casts to float32 (``ops.cast(x, "float32")``).
    In the float64 check the cast keeps float64: float64 rules, a note naming
    the cast's line, and the worst element's analytic value equal to a float64
    central difference of the same model written in numpy (float32 round-off
    would be about 1e-7 relative, the tolerance here 1e-8). Outside the check,
    Keras' cast is its own: float64 in, float32 out."""
    import keras

    run, doc = checked("keras_cast_float32.py")
    assert run.exit_code == 0, run
    model = only_model(doc)
    assert_float64_rules(model)
    (note,) = [n for n in model["notes"] if n.startswith("kept float64 where the model casts to float32")]
    cast = line_of("keras_cast_float32.py", 'x = ops.cast(x, "float32")')
    assert f"(keras_cast_float32.py:{cast})" in note, note

    module = fixture_module("keras_cast_float32.py")
    dense, norm = module.model.layers[1], module.model.layers[2]
    kernel, bias = (np.asarray(w, np.float64) for w in dense.get_weights())
    scale = np.asarray(norm.get_weights()[0], np.float64)

    def forward(x):
        h = np.tanh(x @ kernel + bias)
        return h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6) * scale

    x = np.asarray(module.inputs["x"], np.float64)
    worst = pair(doc)["worst"]
    (i, j), out = worst["input_index"], tuple(worst["output_index"])
    step = np.zeros_like(x)
    step[i, j] = 1e-6
    truth = (forward(x + step)[out] - forward(x - step)[out]) / 2e-6
    assert worst["analytic"] == pytest.approx(truth, rel=1e-8, abs=1e-10)

    y = keras.ops.cast(keras.ops.convert_to_tensor(np.ones(3)), "float32")
    assert keras.backend.standardize_dtype(y.dtype) == "float32"
