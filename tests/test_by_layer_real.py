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
    return load_model(fixture(name)), checked(name, mode="full")


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
