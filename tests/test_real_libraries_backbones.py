"""Three more keras-hub backbones, each from its constructor with a tiny
config (tests/models/hub_{gpt2,bert,llama}_tiny.py; no weights downloaded),
checked as a user checks them: the default check of the file (every weight)
passes, the weights that cannot reach an output are called disconnected and
nothing else is excused, and gradcli's J^T c with respect to every weight
equals central differences computed here.

The truth is independent of gradcli: the same backbone rebuilt from its config
in float64 holding the same weights, differenced along a random direction in
every weight at once and along one weight alone, at two steps that must agree
with each other first (so the reference is converged). Llama's RMS norms
compute in float32 whatever the dtype (keras-hub casts), so its differences
carry float32 round-off: its rule is stated where it is used.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os

import numpy as np
import pytest

import gradcli as api
from tests.conftest import fixture, line_of

#: One worker runs this module: its module-scoped fixture builds three backbones (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

#: file -> (the backbone's class name, the pairs that must be disconnected:
#: weights whose every path to that output is absent by construction).
BACKBONES = {
    "hub_gpt2_tiny.py": ("GPT2Backbone", set()),
    "hub_bert_tiny.py": ("BertBackbone", {("pooled_dense/kernel", "sequence_output"),
                                          ("pooled_dense/bias", "sequence_output")}),
    "hub_llama_tiny.py": ("LlamaBackbone", {("token_embedding/reverse_embeddings", "output")}),
}


def load(name: str):
    pytest.importorskip("keras_hub")
    import keras

    keras.utils.set_random_seed(36)  # the same initial weights every run
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py") + "_once", fixture(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def backbones():
    return {name: load(name) for name in BACKBONES}


@pytest.mark.parametrize("name", list(BACKBONES))
def test_the_default_check_of_a_tiny_backbone_passes_every_connected_pair(name):
    """Every weight checked (the default), every element (auto picks the full
    check at this size); the only excused pairs are the disconnected ones the
    architecture implies."""
    result = api.check(fixture(name))
    assert result.ok, result
    (model,) = result.models
    verdicts = {(p.input, p.output): p.verdict for p in model.pairs}
    _, disconnected = BACKBONES[name]
    assert {k for k, v in verdicts.items() if v == "disconnected"} == disconnected, verdicts
    assert {v for k, v in verdicts.items() if k not in disconnected} == {"pass"}, verdicts
    assert all(p.mode == "full" for p in model.pairs), {p.mode for p in model.pairs}


def float64_twin(module):
    import keras_hub

    cls = getattr(keras_hub.models, BACKBONES[module.__name__.removesuffix("_once") + ".py"][0])
    twin = cls.from_config(dict(module.model.get_config(), dtype="float64"))
    twin.set_weights(module.model.get_weights())
    return twin


@pytest.mark.parametrize("name", list(BACKBONES))
def test_a_backbones_weight_gradients_are_float64_central_differences(backbones, name):
    """<J^T c, d> by gradcli, for c a seeded normal cotangent of every output,
    against (f(w + h d) - f(w - h d)) / 2h with f = sum over outputs of
    <c, output>: d a random direction in all weights at once, then in the
    query kernel alone (the first attention weight, a matmul and a softmax
    away from the outputs)."""
    module = backbones[name]
    outputs = module.model(module.inputs)
    outputs = outputs if isinstance(outputs, dict) else {"output": outputs}
    rng = np.random.default_rng(36)
    cotangents = {o: rng.standard_normal(tuple(v.shape)) for o, v in outputs.items()}
    taken = api.vjp(module.model, module.inputs, cotangents).gradients  # None: disconnected
    gradients = {g.name: 0.0 if g.values is None else g.values for g in taken}

    twin = float64_twin(module)
    variables = list(twin.trainable_variables)
    names = [n for n in gradients if n not in module.inputs]
    assert len(names) == len(variables), (names, [v.path for v in variables])
    starts = [v.numpy() for v in variables]

    def f(direction, h):
        for v, w, d in zip(variables, starts, direction):
            v.assign(w + h * d)
        found = twin(module.inputs)
        found = found if isinstance(found, dict) else {"output": found}
        for v, w in zip(variables, starts):
            v.assign(w)
        return sum(float(np.sum(cotangents[o] * np.asarray(found[o], np.float64))) for o in cotangents)

    def central(direction, h):
        return (f(direction, h) - f(direction, -h)) / (2 * h)

    every = [rng.standard_normal(w.shape) for w in starts]
    query = [rng.standard_normal(w.shape) if "query/kernel" in n else np.zeros_like(w) for n, w in zip(names, starts)]
    assert sum(int(np.any(d)) for d in query) == 1, names  # one query kernel in a one-layer backbone
    # Llama's float32 norms round its outputs at ~6e-8 each: differences of a
    # derivative as small as the query kernel's (~1e-2) stay noisy at every
    # step, so for it only the direction in every weight is a reference.
    for direction in (every,) if name == "hub_llama_tiny.py" else (every, query):
        analytic = sum(float(np.sum(gradients[n] * d)) for n, d in zip(names, direction))
        reference, spread = converged([central(direction, h) for h in STEPS])
        assert abs(reference) > 1e-4, reference  # the direction reaches the outputs: no vacuous comparison
        assert spread <= CONVERGED[name] * abs(reference), (reference, spread)
        np.testing.assert_allclose(analytic, reference, rtol=CONVERGED[name])


#: The steps of the reference's central differences, a decade apart.
STEPS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
#: How close two consecutive steps' differences must be for the reference to
#: count as converged, relative, and the analytic value to it. In float64 a
#: central difference errs by ~h^2 f''' (truncation) plus ~1e-16 |f| / h
#: (rounding), so some step lies below 1e-7 of these derivatives. Llama's RMS
#: norms compute in float32 (keras-hub casts): rounding ~6e-8 |f| / h.
CONVERGED = {"hub_gpt2_tiny.py": 1e-7, "hub_bert_tiny.py": 1e-7, "hub_llama_tiny.py": 1e-4}


def converged(values: list[float]) -> tuple[float, float]:
    """The reference of a ladder of central differences: the finer of the two
    consecutive steps that agree best, and their difference. Coarse steps err
    by truncation and fine ones by rounding; between them the differences agree."""
    gaps = [abs(a - b) for a, b in zip(values, values[1:])]
    best = int(np.argmin(gaps))
    return values[best + 1], gaps[best]


#: Backbones whose constructors fix a floating dtype the float64 rebuild must
#: override, and the pairs their architecture leaves disconnected.
FIXED_FLOAT32 = {
    # The encoder_features Input is float32 whatever the backbone's dtype; the
    # decoder's weights never reach the encoder's output.
    "hub_whisper_tiny.py": lambda pair: pair.output == "encoder_sequence_output" and pair.input.startswith(
        ("decoder_", "transformer_decoder_layer_")),
    # The attention's Softmax is built with dtype="float32".
    "hub_falcon_tiny.py": lambda pair: False,
}


@pytest.mark.parametrize("name", list(FIXED_FLOAT32))
def test_a_backbone_whose_constructor_fixes_float32_is_checked_in_float64(name):
    """keras-hub's WhisperBackbone builds its ``encoder_features`` Input as
    float32 (a functional call converts data to each Input's dtype), and
    Falcon its attention's Softmax with ``dtype="float32"``, whatever the
    backbone's dtype. The float64 rebuild kept them: the precision rule then
    judged the model in float32, and pairs of the correct model failed as
    inconclusive (Whisper 14, Falcon 1). Checked in float64, every pair that
    the architecture connects passes."""
    pytest.importorskip("keras_hub")
    result = api.check(fixture(name))
    assert result.ok, result
    (model,) = result.models
    assert model.dtype == "float64" and model.tolerance.rtol == 1e-6, (model.dtype, model.tolerance)
    disconnected = FIXED_FLOAT32[name]
    for pair in model.pairs:
        expected = "disconnected" if disconnected(pair) else "pass"
        assert pair.verdict == expected, (pair.input, pair.output, pair.verdict)
    assert not any("computes in float32" in note for note in model.notes), model.notes


def test_a_fast_projection_too_noisy_to_judge_is_settled_element_by_element(monkeypatch):
    """Falcon's key bias adds the same q.b to every logit of a query's row,
    which the softmax ignores: its derivative is exactly 0. Checked fast, the
    random projections of that 0 are swamped by their own finite-difference
    noise (inconclusive, which failed the correct model). The round-off
    retry's second rung, 256 times the step, confirms the 0 (the function does
    not change along the bias at all). With its first rung only, the pair is
    checked element by element, as a failing one is, and every element is 0
    within the tolerance on both sides."""
    pytest.importorskip("keras_hub")
    from gradcli.analyses.check import full

    result = api.check(fixture("hub_falcon_tiny.py"), mode="fast")
    (model,) = result.models
    bias = next(p for p in model.pairs if p.input == "attention/key_dense/bias")
    assert bias.verdict == "pass" and any("at 256 times the step they agree" in w for w in bias.warnings), (
        bias.verdict, bias.warnings)
    assert result.ok
    monkeypatch.setattr(full, "ROUNDOFF_RETRY", full.ROUNDOFF_RETRY[:1])
    result = api.check(fixture("hub_falcon_tiny.py"), mode="fast")
    (model,) = result.models
    bias = next(p for p in model.pairs if p.input == "attention/key_dense/bias")
    assert "fast check was inconclusive; element-wise comparison shown" in bias.warnings, bias.warnings
    assert bias.verdict == "pass", (bias.verdict, bias.explanation)
    atol = model.tolerance.atol
    assert abs(bias.worst.analytic) <= atol and abs(bias.worst.numeric) <= atol, bias.worst
    assert bias.max_abs_error <= atol
    assert result.ok, [(p.input, p.verdict) for p in model.pairs if p.failed]


def test_a_keras_hub_models_float32_casts_keep_float64_and_it_passes():
    """keras-hub's Qwen3 casts to float32 inside (``ops.cast(x, "float32")``:
    its RMS norms, query and key norms, and its SiLU), Keras' mixed-precision
    idiom for at least float32. Its default check was inconclusive at its
    token embedding, judged at float32 rules. In the float64 check those casts
    keep float64: nothing computes in float32, every pair passes at float64
    rules, and the note names each cast by the library's own lines."""
    keras_hub = pytest.importorskip("keras_hub")
    root = os.path.join(os.path.dirname(keras_hub.__file__), "src", "models", "qwen3")
    result = api.check(fixture("hub_qwen3_tiny.py"))
    (model,) = result.models
    assert result.ok, [(p.input, p.verdict) for p in model.pairs if p.failed]
    assert model.dtype == "float64" and not any("computes in float32" in n for n in model.notes), model.notes
    assert all(p.verdict == "pass" for p in model.pairs)
    (note,) = [n for n in model.notes if n.startswith("kept float64 where the model casts to float32")]
    for file, text in (("qwen3_layernorm.py", 'x = ops.cast(x, "float32")'),
                       ("qwen3_decoder.py", 'gate_output = ops.cast(gate_output, "float32")')):
        assert f"{file}:{line_of(os.path.join(root, file), text)}" in note, note


def test_a_joint_row_too_noisy_to_judge_is_settled_input_by_input(monkeypatch):
    """A model that computes in float32 inside a float64 check: Llama's RMS
    norms as they ran before the check kept their float32 casts float64
    (``keras_float64.float32_casts_kept``, switched off here; a library op
    without a float64 kernel does the same). A projection along every weight
    at once carries the float32 round-off of all of them: the whole-model
    joint row that the fast check with the layer pass runs stays
    inconclusive even at 16, 256 and 4096 times the step, which failed the
    correct model. The whole model is then checked input by input, as the
    fast check does without the layer pass: every pair the architecture
    connects passes, the one it leaves disconnected is called so, and a note
    says why the joint row gave way."""
    pytest.importorskip("keras_hub")
    from gradcli.model import keras_float64

    monkeypatch.setattr(keras_float64, "float32_casts_kept", lambda sites: contextlib.nullcontext(sites))
    result = api.check(fixture("hub_llama_tiny.py"), mode="fast", by_layer=True)
    (model,) = result.models
    assert any("computes in float32" in n for n in model.notes), model.notes
    assert any("joint check stayed inconclusive after the round-off retry" in n for n in model.notes), model.notes
    assert not any(p.input.endswith("inputs jointly") for p in model.pairs)
    disconnected = BACKBONES["hub_llama_tiny.py"][1]
    assert {(p.input, p.output) for p in model.pairs if p.verdict == "disconnected"} == disconnected
    assert all(p.verdict == "pass" for p in model.pairs if (p.input, p.output) not in disconnected), [
        (p.input, p.verdict) for p in model.pairs if p.verdict != "pass"]
    assert model.layers and not any(r.failed for r in model.layers)
    assert result.ok
