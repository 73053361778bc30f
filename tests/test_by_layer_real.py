"""The layer pass (``gradcli.analyses.layers``) on the shapes real transformers
take (issue 35, item 7): a backbone kept beside the model built on it, layers
whose weights stay float32 inside a float64 check, and a wrong activation in a
GPT-2 style stack whose attention holds TensorFlow's own softmax.

Truth: the activations that reach a layer are recomputed here in numpy
float64 from the model's weights, and the wrong gradients are known in closed
form (a GELU's derivative times 1.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import fixture, line_of

#: One worker runs this module: its module-scoped fixture is costly (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

pytest.importorskip("keras")


def checked(name: str, **options):
    """The API's check of a fixture with the layer pass forced: its one model result."""
    import gradcli

    result = gradcli.check(fixture(name), by_layer=True, **options)
    (model,) = result.models
    return model


def gelu_derivative(h: np.ndarray) -> np.ndarray:
    """d/dh h Phi(h), in float64 (the exact GELU)."""
    from scipy.special import erf

    return 0.5 * (1.0 + erf(h / math.sqrt(2.0))) + h * np.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)


@pytest.fixture(scope="module")
def backbone_wrapper():
    from gradcli.model.loading import load_model

    name = "by_layer_backbone_wrapper.py"
    return load_model(fixture(name)), checked(name, mode="fast")


def test_a_backbone_kept_beside_its_wrapper_is_walked_through_the_checked_model(backbone_wrapper):
    """The file holds the backbone in a module-level variable and ``model`` a
    wrapper with the same weights (as ``GPT2CausalLM(backbone=backbone)``):
    the pass finds the layers through the model that is checked."""
    model, result = backbone_wrapper
    path = fixture("by_layer_backbone_wrapper.py")
    layers = {r.label: r for r in result.layers}
    assert set(layers) == {"wrapper/backbone/up", "wrapper/backbone/gelu", "wrapper/backbone/down"}
    assert any("3 layer calls checked" in n for n in result.notes), result.notes
    wrong = layers["wrapper/backbone/gelu"]
    assert wrong.failed and wrong.verdict == "mismatch" and wrong.class_name == "Gelu"
    assert wrong.call_site.endswith(f"by_layer_backbone_wrapper.py:{line_of(path, 'def call(self, x):')}")
    assert not layers["wrapper/backbone/up"].failed and not layers["wrapper/backbone/down"].failed
    assert result.layers[0] is wrong and result.error is None
    # Independent reference: the GELU's input is x W + b (float64), and the
    # custom gradient is 1.1 times the true derivative, which is 0 nowhere near these inputs.
    h = model.point["x"] @ model.point["up/kernel"] + model.point["up/bias"]
    (pair,) = [p for p in wrong.pairs if p.failed]
    assert pair.input == "x" and pair.mode == "full" and pair.n_failing == h.size
    for element in pair.failing:
        assert element.analytic == pytest.approx(1.1 * element.numeric, rel=1e-6)
    assert np.all(np.abs(gelu_derivative(h)) > 1e-3)  # so every element of the gradient is off by 10%
    assert pair.culprit is not None
    assert pair.culprit.definition.endswith(f"by_layer_backbone_wrapper.py:{line_of(path, 'def gelu(x):')}")


@pytest.fixture(scope="module")
def float32_weights():
    return checked("by_layer_float32_weights.py", mode="fast")


def test_layers_keeping_float32_are_each_checked_in_float64(float32_weights):
    """A Conv1D fed float32 by its Input, a frozen float32 table and a layer
    norm whose weights stay float32, in a model checked in float64 (by
    switching its layers' policies): every unit is checked in float64, none
    is an error row. Truth: each gradient is right, so a check in float64
    differs from finite differences by float64's round-off (below 1e-8 for
    derivatives of size 1: the checked function is <c, y>, c of unit norm),
    where one computed in float32 differs by 1e-6 to 1e-4."""
    result = float32_weights
    layers = {r.label: r for r in result.layers}
    assert set(layers) == {"mixed/conv", "mixed/positions", "mixed/norm", "mixed/head"}
    assert result.error is None and result.ok
    for row in layers.values():
        assert row.verdict == "pass" and row.error is None and row.mode == "full", row
        assert row.call_proof is not None and row.call_proof.proven
        for pair in row.pairs:
            assert pair.max_abs_error < 1e-8, (row.label, pair)
    assert layers["mixed/conv"].weights == 3 * 4 * 6 + 6 and layers["mixed/conv"].elements == 2 * 8 * 4
    assert layers["mixed/norm"].weights == 6 + 6


def test_a_layer_whose_check_raises_inside_gradcli_ends_the_model_in_error(monkeypatch):
    """An internal error in one layer's check is never silent: the model's
    row is an error (exit 3) with that layer's message, and the layers and
    pairs it did check stay in the report."""
    import gradcli
    from gradcli.analyses.layers import run

    original = run.layer_model

    def broken(parent, call, *args, **kwargs):
        if call.path == "mixed/norm":
            raise TypeError("a mismatch nobody expected")
        return original(parent, call, *args, **kwargs)

    monkeypatch.setattr(run, "layer_model", broken)
    result = gradcli.check(fixture("by_layer_float32_weights.py"), by_layer=True, mode="fast")
    (model,) = result.models
    assert result.exit_code == 3 and not result.ok
    assert model.error.endswith(
        "layer mixed/norm could not be checked: internal error: TypeError: a mismatch nobody expected "
        "(run with --debug or GRADCLI_DEBUG=1 for the traceback)"
    ), model.error
    norm = next(r for r in model.layers if r.label == "mixed/norm")
    assert norm.verdict == "error" and norm.internal
    assert [r.verdict for r in model.layers if r.label != "mixed/norm"] == ["pass"] * 3
    assert model.pairs and all(not p.failed for p in model.pairs)


def test_a_wrong_gelu_behind_a_masked_softmax_is_the_only_culprit():
    """A GPT-2 style block: causal self-attention (Keras's softmax adds -1e9
    to the masked logits) and a GELU whose custom gradient is 1.1 times the
    true one. Every failing pair of the block names the GELU and nothing
    else: the softmax is TensorFlow's own and right. Before, a probe of the
    softmax stepped every logit by about 6e3 (the step of its largest
    element, -1e9), read 0 where its gradient reads about 2, and named the
    softmax for half the pairs. Truth: the GELU's own probe gives analytic =
    1.1 numeric exactly (its rule is the true derivative times 1.1)."""
    path = fixture("by_layer_attention_wrong_gelu.py")
    result = checked("by_layer_attention_wrong_gelu.py", mode="fast", layers=["block"])
    (block,) = result.layers
    assert block.label == "gpt/block" and block.failed and block.verdict == "mismatch"
    failing = [p for p in block.pairs if p.failed]
    assert {p.input for p in failing} >= {"x", "attention/query/kernel", "attention/key/kernel", "up/kernel"}
    for pair in failing:
        culprit = pair.culprit
        assert culprit is not None, pair.input
        assert "Softmax" not in culprit.site.op_type and "softmax" not in culprit.site.description.lower()
        assert culprit.definition.endswith(f"by_layer_attention_wrong_gelu.py:{line_of(path, 'def gelu(x):')}")
        assert culprit.analytic == pytest.approx(1.1 * culprit.numeric, rel=1e-6), pair.input
