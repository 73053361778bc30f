"""Keras' own code must pass (issue 28, item 10): the false alarms a sweep over
Keras 3's ops, layers and networks found (``bench/keras_sweep.py``), one small
fixture each, and a twin with a wrong gradient where an excuse is new.

Truth is independent of gradcli: closed forms (an average pool's 1/8), the
Keras model evaluated directly at points around the fixture's, and the known
factor of a planted bug."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import check_json, fixture, pairs


def _module(name):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), fixture(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- a weightless Keras model given float64 data falls back to its own dtype ---------

def test_weightless_keras_layer_with_float64_data_is_checked_in_its_float32():
    """AvgPool3D has no float64 kernel on CPU; the layer has no weights, and the
    data was given as float64, so the check had no float32 to fall back to and
    stopped with exit 3 (NotFoundError). Keras computes it in float32."""
    run, doc = check_json(fixture("keras_weightless_float64_data.py"))
    assert run.exit_code == 0, run
    (model,) = doc["result"]["models"]
    assert model["dtype"] == "float32" and model["tolerance"]["rtol"] == pytest.approx(1e-3)
    assert any("x is given as float64; the model converts it to float32 when called" in n for n in model["notes"])
    assert any("does not run in float64" in n and "AvgPool3D" in n for n in model["notes"])


def test_weightless_keras_layer_jacobian_is_the_average_pools():
    import gradcli

    (block,) = gradcli.jacobian(fixture("keras_weightless_float64_data.py")).blocks
    values = np.asarray(block.values).reshape(4, 32)  # outputs (2x2 windows) x inputs 4x4x2
    truth = np.zeros((2, 2, 4, 4, 2))
    for i in range(2):
        for j in range(2):
            truth[i, j, 2 * i:2 * i + 2, 2 * j:2 * j + 2, :] = 1 / 8
    np.testing.assert_allclose(values, truth.reshape(4, 32), atol=1e-7)


# --- a jump (a Keras mask at an exact 0) is named, not inconclusive -------------------

def _jumps_directly(name):
    """The padded elements, and |f(x + t e) - f(x)| at t = 1e-9 and 1e-6 for each,
    evaluated with the Keras model itself in float32 (no gradcli)."""
    module = _module(name)
    x = module.inputs["x"]
    f0 = np.asarray(module.model(x))
    padded = [tuple(i) for i in np.argwhere(x == 0.0)]
    sizes = {}
    for index in padded:
        moved = []
        for t in (1e-9, 1e-6):
            y = x.copy()
            y[index] = t
            moved.append(np.abs(np.asarray(module.model(y)) - f0).max())
        sizes[index] = moved
    return padded, sizes


def test_masked_step_jumps_and_is_not_inconclusive():
    padded, sizes = _jumps_directly("keras_masked_step.py")
    # Independent evidence of the jump: a step 1000x smaller moves f as much.
    for small, large in sizes.values():
        assert small > 1e-3 and small == pytest.approx(large, rel=1e-2)
    run, doc = check_json(fixture("keras_masked_step.py"))
    assert run.exit_code == 0, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "kink" and not pair["failed"]
    assert "jumps" in pair["explanation"] and "NotEqual" in pair["explanation"]
    assert pair["kinks"] and all(k["jump"] for k in pair["kinks"])
    assert {tuple(k["input_index"]) for k in pair["kinks"]} == set(padded)
    # The other inputs (the weights) are judged as before: they pass.
    assert all(p["verdict"] == "pass" for key, p in pairs(doc).items() if key[0] != "x")


def test_a_jump_does_not_hide_a_wrong_gradient_beside_it():
    run, doc = check_json(fixture("keras_masked_step_wrong.py"))
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and pair["failed"]
    # The planted factor: analytic 2 x**2 against 3 x**2, so analytic / numeric = 2/3.
    padded, _ = _jumps_directly("keras_masked_step_wrong.py")
    failing = [e for e in pair["failing"] if tuple(e["input_index"]) not in padded]
    assert len(failing) >= 8
    assert all(e["analytic"] / e["numeric"] == pytest.approx(2 / 3, rel=1e-4) for e in failing)
    assert {tuple(k["input_index"]) for k in pair["kinks"] if k["jump"]} == set(padded)
    # The culprit is the wrong cube, not the mask's select: the select's own
    # derivative holds its condition at the point (local_check.check_op).
    culprit = pair["culprit"]
    assert culprit["site"]["description"].startswith("tf.custom_gradient cube"), culprit
    assert culprit["analytic"] / culprit["numeric"] == pytest.approx(2 / 3, rel=1e-4)


# --- a graph that cannot run inlined: its tf.functions are called as they are ----------

def test_grouped_convolution_runs_through_its_compiled_function_and_passes():
    """Keras' grouped convolution runs inside a jit-compiled tf.function; the
    inlined graph loses the compilation and raised "Fused conv implementation
    does not support grouped convolutions" (exit 3, shown only as "Graph
    execution error:"). The model trains fine: the check must run too."""
    # A fresh process: whether grappler fuses the convolution depends on how
    # TensorFlow was first imported (oneDNN on or off), which a test process
    # shares with every test before it; gradcli's own import turns it off.
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "check", fixture("keras_grouped_conv.py"), "--json"],
        capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"},
    )
    assert done.returncode == 0, done.stderr
    (model,) = json.loads(done.stdout)["result"]["models"]
    assert model["dtype"] == "float64" and all(p["verdict"] == "pass" for p in model["pairs"])
    assert max(p["max_rel_error"] for p in model["pairs"]) < 1e-4
    note = next(n for n in model["notes"] if "inlined does not run" in n)
    assert "Fused conv implementation does not support grouped convolutions" in note


def test_grouped_convolution_twin_with_a_wrong_gradient_fails_at_its_factor():
    run, doc = check_json(fixture("keras_grouped_conv_wrong.py"))
    assert run.exit_code == 1, run
    pair = pairs(doc)[("x", "output")]
    assert pair["verdict"] == "mismatch" and "cube" in pair["culprit"]["site"]["description"]
    assert all(e["analytic"] / e["numeric"] == pytest.approx(2 / 3, rel=1e-5) for e in pair["failing"])


def test_an_error_raised_in_a_graph_shows_its_cause_and_node():
    import tensorflow as tf

    from gradcli.model.core import first_line

    @tf.function
    def f(x):
        return tf.debugging.check_numerics(tf.math.log(x), "log of a negative number")

    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        f(tf.constant([-1.0]))
    assert str(raised.value).splitlines()[0].strip() == "Graph execution error:"
    line = first_line(raised.value)
    assert line.startswith("log of a negative number")  # the cause, not the header
    assert "(at node CheckNumerics)" in line


# --- ties of relu zeros in overlapping pools: the ordered tie break -------------------

def test_overlapping_pools_over_relu_zeros_earn_their_kink_when_sampled():
    """A sampled re-check leaves the kinks' tied partners out, so the mixed
    difference sees no shared kink; the pool failed as 'not a valid
    subgradient'. Independent truth: TensorFlow's max-pool gradient at the
    captured activations equals its gradient with the ties broken in index
    order (earlier elements larger by 1e-9), where the pool is differentiable."""
    import gradcli
    import tensorflow as tf

    # A budget no machine's re-check fits, so the re-check is always the sampled
    # one this test is about (at 0.2 s a fast machine re-checked every element).
    result = gradcli.check(fixture("by_layer_pool_zero_ties.py"), layers=["pool"], budget=0.01)
    (model,) = result.models
    assert result.exit_code == 0, model.layers
    (pool,) = [layer for layer in model.layers if layer.path == "stem/pool"]
    (pair,) = pool.pairs
    assert pool.verdict == "kink" and not pool.failed
    assert pair.tie_broken_agrees and pair.kinks_shared is False
    assert any("drawn at random" in w for w in pair.warnings)

    # The closed-form check of the evidence, outside gradcli.
    module = _module("by_layer_pool_zero_ties.py")
    net = module.model
    pre = keras_relu_output(net, module.inputs["x"])
    assert (pre == 0).mean() > 0.5
    cotangent = np.random.default_rng(0).standard_normal((1, 19, 19, 16))

    def gradient(x):
        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(tf.nn.max_pool2d(x, 3, 2, "VALID") * cotangent)
        return tape.gradient(y, x).numpy()

    order = 1.0 - np.arange(pre.size).reshape(pre.shape) / pre.size
    first = gradient(pre + 2.0**-30 * order)
    last = gradient(pre + 2.0**-30 * (1.0 - order))
    assert np.array_equal(gradient(pre), first) and not np.array_equal(first, last)


def keras_relu_output(net, x):
    import keras

    return np.asarray(keras.Model(net.inputs, net.get_layer("relu").output)(x), dtype=np.float64)
