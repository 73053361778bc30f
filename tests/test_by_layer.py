"""The layer-by-layer pass (``gradcli.analyses.by_layer``) on small Keras models:
functional, Sequential, subclassed with a nested model, a shared layer.

Truth: the activations that reach a layer are recomputed here in numpy float64
from the model's weights (an independent reference), and the wrong gradients
are known in closed form (halved where x > 1, doubled where x < 0)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from conftest import error_line, fixture, gradcli, line_of

pytest.importorskip("keras")


@lru_cache(maxsize=None)
def layers_of(name: str, **options):
    """Load a fixture and run the pass alone (no whole-model check): its results by path."""
    from gradcli.analyses.check import check_layers
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    model = load_model(fixture(name))
    results, notes = check_layers(model, CheckOptions(by_layer=True, **options))
    return model, {r.label: r for r in results}, notes, results


def failing_pairs(result):
    return [p for p in result.pairs if p.failed]


def test_functional_names_the_wrong_layer_with_class_path_and_call_line():
    model, layers, notes, ordered = layers_of("by_layer_functional.py")
    path = fixture("by_layer_functional.py")
    assert set(layers) == {"net/d1", "net/swish", "net/d2"}
    wrong = layers["net/swish"]
    assert wrong.failed and wrong.verdict == "mismatch" and wrong.class_name == "Swish"
    assert wrong.call_site.endswith(f"by_layer_functional.py:{line_of(path, 'def call(self, x):')}")
    assert ordered[0] is wrong  # failures first
    assert not layers["net/d1"].failed and not layers["net/d2"].failed
    # Independent reference: the activation entering swish is x W1 + b1 in float64.
    x = model.point["x"]
    h = x @ model.point["d1/kernel"] + model.point["d1/bias"]
    above = h > 1.0
    assert above.any() and not above.all()
    (pair,) = failing_pairs(wrong)
    assert pair.input == "x" and pair.mode == "full"
    assert pair.n_failing == int(above.sum())  # wrong exactly where x > 1
    for element in pair.failing:
        assert above[tuple(element.input_index)]
        assert element.analytic == pytest.approx(0.5 * element.numeric, rel=1e-6)
    culprit = pair.culprit
    assert culprit is not None and culprit.definition.endswith(
        f"by_layer_functional.py:{line_of(path, 'def swish(x):')}"
    )
    assert wrong.call_proof is not None and wrong.call_proof.proven
    assert any("3 layer calls checked (3 in full" in n for n in notes)
    # The estimate up front cannot foresee a failure: the note says what the failing layer took.
    (pass_note,) = [n for n in notes if n.startswith("layer by layer: ")]
    assert pass_note.endswith(f"up front, for layers that pass; the failing layer took {wrong.seconds:.1f} s of it)")


def test_the_unmodified_model_passes_every_layer():
    _, layers, notes, _ = layers_of("by_layer_functional_ok.py")
    assert not any("failing layer" in n for n in notes)
    assert set(layers) == {"net/d1", "net/swish", "net/d2"}
    for result in layers.values():
        assert result.verdict == "pass" and not result.failed, result
        assert result.call_proof.proven
        assert result.pairs and all(p.verdict == "pass" for p in result.pairs)


def test_sequential_states_the_power_of_projections():
    model, layers, _, _ = layers_of("by_layer_sequential.py")
    assert set(layers) == {"seq/wide", "seq/head"}
    wide = layers["seq/wide"]
    assert wide.weights == 40 * 64 + 64 and wide.elements == 2 * 40
    assert wide.mode == "fast" and wide.verdict == "pass"
    power = wide.power
    assert power is not None and power.probability == 0.95 and power.probes == 3
    assert power.relative == pytest.approx(power.absolute / power.element_size)
    assert 0 < power.relative < 1  # a single element off by less than its RMS size is seen
    assert layers["seq/head"].mode == "full" and layers["seq/head"].power is None
    pairs = [p.power for p in wide.pairs]
    assert power.absolute == max(p.absolute for p in pairs)  # the weakest pair's
    assert min(p.element_size for p in pairs) <= power.element_size <= max(p.element_size for p in pairs)


def test_a_layers_power_is_relative_to_the_rms_element_of_its_whole_gradient():
    """Two pairs: a kernel of 300 elements (RMS 0.2, detectable 1e-3) and a
    bias of 4 elements whose gradient is zero by symmetry (RMS 1e-12,
    detectable 1e-14). The layer's power is the weakest pair's 1e-3 against
    the pooled RMS sqrt((300 * 0.04 + 4 * 1e-24) / 304), not the bias's
    1e-14 / 1e-12 = 1% nor a ratio against its round-off."""
    from gradcli.analyses.layers.run import layer_power
    from gradcli.results import PairResult, Power

    def pair(name, absolute, size):
        result = PairResult(input=name, output="o", verdict="pass", failed=False, mode="fast",
                            max_abs_error=0.0, max_rel_error=0.0, fd_error=0.0, compared=3)
        result.power = Power(absolute=absolute, relative=absolute / size, element_size=size,
                             probability=0.95, probes=3)
        return result

    power = layer_power([pair("kernel", 1e-3, 0.2), pair("bias", 1e-14, 1e-12)], {"kernel": 300, "bias": 4})
    rms = np.sqrt((300 * 0.2**2 + 4 * 1e-24) / 304)
    assert power.absolute == 1e-3 and power.element_size == pytest.approx(rms, rel=1e-12)
    assert power.relative == pytest.approx(1e-3 / rms, rel=1e-12)
    assert layer_power([], {}) is None


def test_subclassed_model_with_a_nested_model():
    model, layers, _, _ = layers_of("by_layer_subclassed.py")
    assert set(layers) == {"outer/inner/inner_dense", "outer/act", "outer/head"}
    act = layers["outer/act"]
    path = fixture("by_layer_subclassed.py")
    assert act.failed and act.class_name == "Softplus"
    assert act.call_site.endswith(f"by_layer_subclassed.py:{line_of(path, 'def call(self, x):')}")
    assert not layers["outer/inner/inner_dense"].failed and not layers["outer/head"].failed
    h = model.point["x"] @ model.point["inner/inner_dense/kernel"] + model.point["inner/inner_dense/bias"]
    (pair,) = failing_pairs(act)
    assert pair.n_failing == int((h < 0).sum()) > 0  # wrong exactly where x < 0
    # No float64 clone of a subclassed model: it runs in float64 by its layers' policies.
    assert str(model.dtype) == "float64" and model.float64_by_policies
    assert act.call_proof.proven
    for element in pair.failing:
        assert element.analytic == pytest.approx(2.0 * element.numeric, rel=1e-6)


def test_a_shared_layer_is_checked_at_each_call_site():
    _, layers, _, _ = layers_of("by_layer_shared.py")
    assert set(layers) == {"twin/shared (call 1 of 2)", "twin/shared (call 2 of 2)", "twin/join", "twin/out"}
    first, second = layers["twin/shared (call 1 of 2)"], layers["twin/shared (call 2 of 2)"]
    assert (first.call_index, second.call_index) == (1, 2)
    assert all(r.verdict == "pass" for r in layers.values())
    assert {p.input for p in first.pairs} == {"inputs", "shared/kernel", "shared/bias"}
    join = layers["twin/join"]  # no weights: its input gradients
    assert join.weights == 0 and {p.input for p in join.pairs} == {"inputs_0", "inputs_1"}


def test_command_line_layer_table_json_and_exit_code():
    path = fixture("by_layer_functional.py")
    run = gradcli("check", path, "--mode", "fast", "--by-layer", "--layers", "sw*", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    (row,) = model["layers"]
    assert row["path"] == "net/swish" and row["class_name"] == "Swish" and row["failed"]
    text = gradcli("check", path, "--mode", "fast", "--layers", "swish")
    assert text.exit_code == 1, text
    assert "layer by layer: 1 layer calls" in text.stdout
    assert "FAIL layer net/swish: Swish (call at " in text.stdout


def test_bad_layer_options_are_usage_errors():
    path = fixture("by_layer_functional.py")
    run = gradcli("check", path, "--mode", "fast", "--layers", "nothing*")
    assert run.exit_code == 2 and "match no layer" in error_line(run) and "net/swish" in run.stderr
    run = gradcli("check", path, "--no-by-layer", "--layers", "swish")
    assert run.exit_code == 2 and "--by-layer" in error_line(run) and "choose one" in error_line(run)


def test_the_shape_pass_times_each_units_own_call_for_the_estimate():
    """The estimate up front counts a unit's quick-check evaluations at its own
    eager call's seconds (``plan._estimate``): the shape pass times each
    outermost unit call. Those calls run one after another inside one
    forward pass, so their seconds are positive and sum to no more than the
    pass's own."""
    from gradcli.analyses.layers.capture import shape_pass
    from gradcli.analyses.layers.units import keras_root
    from gradcli.model.loading import load_model

    model = load_model(fixture("by_layer_functional.py"))
    calls, forward_seconds = shape_pass(model, keras_root(model))
    assert len(calls) >= 3 and all(c.seconds > 0 for c in calls), [(c.path, c.seconds) for c in calls]
    assert sum(c.seconds for c in calls) <= forward_seconds


def test_memory_guard_refuses_the_pass_with_the_cheaper_route():
    path = fixture("by_layer_functional.py")
    run = gradcli("check", path, "--mode", "fast", "--by-layer", "--max-memory", "2000")
    assert run.exit_code == 2, run
    line = error_line(run)
    assert "the layer-by-layer pass" in line and "Check the whole model only" in line
    # Raised inside the model's check, it names the flags the user types.
    assert line.count("--max-memory") == 2 and "--layers NAME" in line and "max_memory" not in line


def test_ties_of_a_max_pool_are_a_kink_earned_at_nearby_points():
    # Independent truth: the pool's input is relu(x), exactly zero on runs of 7
    # steps, so windows of 3 hold ties; TensorFlow's max-pool gradient (first
    # maximum of each window) is a valid subgradient there, and the layer's
    # gradient is right wherever it is differentiable.
    model, layers, notes, _ = layers_of("by_layer_ties.py")
    x = model.point["x"]
    zeros = np.maximum(x, 0.0) == 0.0
    tied_windows = zeros[:, :-2] & zeros[:, 1:-1] & zeros[:, 2:]
    assert tied_windows.sum() >= 2 * 4 * 5
    pool = layers["ties/pool"]
    assert not pool.failed and pool.verdict == "kink", pool
    assert any("kink at ties" in n and "the layer passes" in n for n in pool.notes)
    (pair,) = [p for p in pool.pairs if p.verdict == "kink"]
    assert pair.input == "inputs" and not pair.failed and pair.n_kinks > 0
    assert pair.kinks_shared is True  # tied maxima share their kinks (diagnose.shared_kinks)
    for kink in pair.kinks:  # every kink sits on a tie of exact zeros
        assert zeros[tuple(kink.input_index)]
    assert all(not r.failed for r in layers.values())


def test_hand_written_pool_counting_every_tied_maximum_fails_at_the_ties():
    # by_layer_ties.py's network with a pool whose gradient gives every maximum
    # of a window the window's full gradient: right off the ties (so the pool
    # passes at nearby points), wrong at the relu zeros' ties. Moved together,
    # the zeros move each all-zero window's maximum by one step; the gradient
    # says three (every window of 3 zeros counts each zero in full), so the
    # closed form is analytic = 3 numeric, and the tie rule of the layer pass
    # does not excuse it.
    run = gradcli("check", fixture("by_layer_ties_wrong.py"), "--by-layer", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    pool = next(r for r in model["layers"] if r["path"] == "ties/pool")
    assert pool["failed"] and pool["verdict"] == "kink"
    assert not any("kink at ties" in n for n in pool["notes"])
    (pair,) = [p for p in pool["pairs"] if p["verdict"] == "kink"]
    assert pair["failed"] and pair["n_tie_refused"] == 1
    (row,) = pair["tie_refused"]
    assert abs(row["numeric"]) > 1e-3  # within the numeric slope's own error estimate, tripled with it
    assert abs(row["analytic"] - 3.0 * row["numeric"]) <= 3.0 * row["fd_error"] < 1e-5 * abs(row["analytic"])
    assert [r["path"] for r in model["layers"] if r["failed"]] == ["ties/pool"]


def test_a_kink_of_one_element_on_tied_zeros_is_not_excused_as_a_tie():
    # A hand-written relu with gradient 5 at exactly 0, fed a relu's zeros
    # (exact ties): each zero is a kink of its own (the layer is separable in
    # it), its slopes 0 and c_i, and 5 c_i is outside them. Its non-smoothness
    # is shared with no other element (diagnose.shared_kinks: the mixed
    # difference with the other kinks is 0), so the tie rule does not judge it
    # at nearby points, where it would pass. Closed form per kink: left 0,
    # analytic 5 right. Keras' ReLU in its place (gradient 0) passes; the
    # zero rows of by_layer_kinks_at_point.py, whose elements each move a
    # whole row of relu kinks, share theirs and keep their excuse (checked in
    # test_joint_row_at_exact_kinks_of_many_elements_is_judged_at_a_nearby_point).
    run = gradcli("check", fixture("by_layer_relu_zero_wrong.py"), "--by-layer", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    layer = next(r for r in model["layers"] if r["path"] == "zeros/again")
    assert layer["failed"] and layer["verdict"] == "kink"
    assert not any("kink at ties" in n for n in layer["notes"])
    (pair,) = [p for p in layer["pairs"] if p["verdict"] == "kink"]
    assert pair["failed"] and pair["kinks_shared"] is False and pair["n_tie_refused"] == 0
    assert pair["n_kinks"] > 10
    for kink in pair["kinks"]:
        assert not kink["subgradient"] and not kink["tie"]
        assert kink["left"] == pytest.approx(0.0, abs=1e-9)
        assert kink["analytic"] == pytest.approx(5.0 * kink["right"], rel=1e-6)
    assert [r["path"] for r in model["layers"] if r["failed"]] == ["zeros/again"]
    run = gradcli("check", fixture("by_layer_relu_zero.py"), "--by-layer", "--json")
    assert run.exit_code == 0, run
    assert not any(r["failed"] for r in run.result["models"][0]["layers"])


def test_tensorflows_forward_mode_caches_are_met_under_one_lock(monkeypatch):
    # TensorFlow's forward mode runs each op's JVP through module-level
    # tf.functions whose caches are not safe to grow from two threads at once
    # (an EfficientNet-B0's joint check, beside the layer pass, raised
    # "OrderedDict mutated during iteration" about one run in two): wherever
    # either thread meets them (TensorFlow's dispatch, a JVP function traced),
    # numerics.jvp_functions.CACHE_LOCK is held. A product does not hold it
    # while it runs (every ForwardAccumulator is opened without it), so the
    # joint check's forward mode and the layer pass's probes run beside each
    # other (held for every product, a ResNet-50's pass waited 6.6 s).
    import threading

    import tensorflow as tf
    from tensorflow.python.eager import forwardprop
    from tensorflow.python.eager.polymorphic_function import tracing_compilation

    from gradcli.analyses import check
    from gradcli.analyses.layers import units as by_layer
    from gradcli.model.loading import load_model
    from gradcli.numerics import jvp_functions
    from gradcli.options import CheckOptions

    lock = jvp_functions.CACHE_LOCK
    opened, met = [], []

    jvp_configs = (forwardprop._jvp_exact_config, forwardprop._jvp_relaxed_config)

    def recording(real, what):
        def call(*args, **kwargs):
            if what == "dispatch" or kwargs.get("tracing_options") in jvp_configs:  # a JVP function's trace
                met.append((what, threading.current_thread().name, lock._is_owned()))
            return real(*args, **kwargs)
        return call

    real_enter = tf.autodiff.ForwardAccumulator.__enter__

    def entered(self):
        opened.append((threading.current_thread().name, lock._is_owned()))
        return real_enter(self)

    monkeypatch.setattr(tf.autodiff.ForwardAccumulator, "__enter__", entered)
    monkeypatch.setattr(forwardprop, "_jvp_dispatch", recording(forwardprop._jvp_dispatch, "dispatch"))
    monkeypatch.setattr(tracing_compilation, "trace_function", recording(tracing_compilation.trace_function, "trace"))
    monkeypatch.setattr(jvp_functions, "_FRONT", None)  # a front made now: it traces through the recording
    monkeypatch.setattr(by_layer, "FULL_ELEMENTS", 0)  # every unit by projections: its traced probe
    result = check.check_model(load_model(fixture("by_layer_functional.py")), CheckOptions(mode="fast", by_layer=True))
    main = threading.main_thread().name
    assert result.layers and any("joint" in name for name, _ in opened) and any(name == main for name, _ in opened)
    traced = [(name, held) for what, name, held in met if what == "trace"]
    assert any(name == main for name, _ in traced) and any("joint" in name for name, _ in traced), met
    assert all(held for _, _, held in met), met
    assert not any(held for _, held in opened), opened


def test_ties_of_a_max_pool_checked_by_projections_are_earned_through_its_trace(monkeypatch):
    # The same pool checked by projections (as a real network's pools are):
    # at the captured ties it fails as kinks (check_model, once), and the
    # nearby points take the pool's signature trace instead of a second
    # check_model; the verdict is the same kink, earned there.
    from gradcli.analyses.check import model as check
    from gradcli.analyses.layers import units as by_layer
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    calls = []
    real = check.check_model

    def counted(model, options, proof=None):
        calls.append(model.name)
        return real(model, options, proof)

    monkeypatch.setattr(by_layer, "FULL_ELEMENTS", 0)
    monkeypatch.setattr(check, "check_model", counted)
    results, _ = check.check_layers(load_model(fixture("by_layer_ties.py")), CheckOptions(by_layer=True))
    layers = {r.label: r for r in results}  # not layers_of's cached pass: this one runs by projections
    pool = layers["ties/pool"]
    assert pool.mode == "fast" and not pool.failed and pool.verdict == "kink", pool
    assert any("kink at ties" in n and "the layer passes its fast check" in n for n in pool.notes)
    assert sum("pool" in name for name in calls) == 1
    assert all(not r.failed for r in layers.values())


def test_whole_model_is_checked_along_joint_directions_when_the_layer_pass_runs():
    for name, wrong in (("by_layer_functional_ok.py", False), ("by_layer_functional.py", True)):
        run = gradcli("check", fixture(name), "--mode", "fast", "--by-layer", "--json")
        assert run.exit_code == (1 if wrong else 0), run
        (model,) = run.result["models"]
        (pair,) = model["pairs"]
        assert pair["input"] == "all 5 inputs jointly" and pair["mode"] == "fast"
        assert pair["failed"] == wrong and pair["power"]["probes"] == 3
        assert any("along joint directions (5 inputs moved at once)" in n for n in model["notes"])
        assert [r["failed"] for r in model["layers"] if r["path"] == "net/swish"] == [wrong]


def test_memory_guard_refuses_the_joint_check_before_any_work():
    # (2 blocks a probe x 50 probes + 3) x 107 elements (4 weights and x) x 8
    # bytes is 88 kB (rules.JOINT_BLOCKS_*); the layer pass of this model needs about 21 kB.
    path = fixture("by_layer_functional.py")
    run = gradcli("check", path, "--mode", "fast", "--by-layer", "--probes", "50", "--max-memory", "60000")
    assert run.exit_code == 2, run
    line = error_line(run)
    assert "the whole-model check along joint directions (50 probes x 107 elements)" in line
    # Raised inside the model's check, it names the flags the user types.
    assert "Use fewer --probes, or check the whole model input by input (--no-by-layer)" in line


def test_a_dead_unit_on_the_relu_kink_is_a_kink_along_the_joint_probes():
    # Independent truth: unit 0's pre-activation x W[:, 0] + b[0] is exactly 0
    # at every sample (its weights are 0), so moving every weight at once moves
    # it by t (u_b + x u_W): the one-sided slopes along the probes differ.
    path = fixture("by_layer_dead_unit.py")
    run = gradcli("check", path, "--mode", "fast", "--by-layer", "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    (pair,) = model["pairs"]
    assert pair["input"] == "all 5 inputs jointly"
    assert pair["verdict"] == "kink" and not pair["failed"]
    assert "the analytic value lies between them" in pair["explanation"]
    rows = {r["path"]: r for r in model["layers"]}
    relu = rows["dead/relu"]
    assert relu["verdict"] == "kink" and not relu["failed"]
    for pair in relu["pairs"]:
        for kink in pair["kinks"]:
            assert kink["input_index"][-1] == 0  # the dead unit only
    assert not rows["dead/d1"]["failed"] and not rows["dead/d2"]["failed"]


def _module_activations(model):
    """The input of each block's Swish in by_layer_modules.py, recomputed in
    numpy float64 from the weights (an independent reference)."""
    p = model.point

    def dense(h, name):
        return h @ p[f"net/{name}/w"] + p[f"net/{name}/b"]

    def swish(z):
        return z / (1.0 + np.exp(-z))

    h = dense(p["x"], "stem")
    z0 = dense(h, "blocks/0/inner")
    h = h + dense(swish(z0), "blocks/0/outer")
    return z0, dense(h, "blocks/1/inner")


def test_a_network_of_tf_modules_names_the_wrong_module_and_its_container():
    model, layers, notes, ordered = layers_of("by_layer_modules.py")
    path = fixture("by_layer_modules.py")
    assert set(layers) == {
        "net/stem", "net/head", "net/blocks/0", "net/blocks/1",
        "net/blocks/0/inner", "net/blocks/0/act (call 1 of 2)", "net/blocks/0/act (call 2 of 2)",
        "net/blocks/0/outer", "net/blocks/1/inner", "net/blocks/1/act", "net/blocks/1/outer",
    }
    wrong, block = layers["net/blocks/1/act"], layers["net/blocks/1"]
    assert ordered[0] is wrong and ordered[1] is block  # failures first, inner units first
    assert wrong.failed and wrong.verdict == "mismatch" and wrong.class_name == "Swish"
    assert wrong.call_site.endswith(f"by_layer_modules.py:{line_of(path, 'return self.function(x)') - 1}")
    assert block.failed and block.class_name == "Block" and block.weights == 2 * (8 * 8 + 8)
    passing = [r for r in layers.values() if r not in (wrong, block)]
    assert all(r.verdict == "pass" and not r.failed and r.call_proof.proven for r in passing)
    assert wrong.call_proof.proven and block.call_proof.proven
    _, z1 = _module_activations(model)
    above = z1 > 1.0
    assert above.any() and not above.all()
    (pair,) = failing_pairs(wrong)
    assert pair.input == "x" and pair.n_failing == int(above.sum())  # wrong exactly where x > 1
    for element in pair.failing:
        assert above[tuple(element.input_index)]
        assert element.analytic == pytest.approx(0.5 * element.numeric, rel=1e-6)
    assert pair.culprit is not None and pair.culprit.definition.endswith(
        f"by_layer_modules.py:{line_of(path, 'def swish(x):')}"
    )
    assert "Swish.__call__" in pair.culprit.site.description and "Keras" not in pair.culprit.site.description
    assert {p.input for p in block.pairs} >= {"x", "net/blocks/1/inner/w", "net/blocks/1/outer/b"}


def test_the_unmodified_network_of_tf_modules_passes_every_module():
    model, layers, _, _ = layers_of("by_layer_modules_ok.py")
    assert len(layers) == 11
    for result in layers.values():
        assert result.verdict == "pass" and not result.failed, result
        assert result.call_proof.proven
    z0, _ = _module_activations(model)
    assert (z0 > 1.0).any()  # the first block's Swish sees the range the wrong one gets wrong


def test_command_line_checks_chosen_tf_modules():
    path = fixture("by_layer_modules.py")
    run = gradcli("check", path, "--layers", "blocks/1/*", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    rows = {row["path"]: row for row in model["layers"]}
    assert set(rows) == {"net/blocks/1/inner", "net/blocks/1/act", "net/blocks/1/outer"}
    assert rows["net/blocks/1/act"]["failed"] and rows["net/blocks/1/act"]["class_name"] == "Swish"
    assert not rows["net/blocks/1/inner"]["failed"] and not rows["net/blocks/1/outer"]["failed"]


def test_joint_row_at_exact_kinks_of_many_elements_is_judged_at_a_nearby_point():
    """Zero (padding) rows of data meet a zero bias: those rows' relu inputs
    are exactly 0, counted here in numpy, and a joint probe moves them all at
    once, so the analytic value (TensorFlow's relu gradient is 0 at 0) need not
    lie between the one-sided slopes of their sum. Every layer passes or is a
    kink; at a nearby point the whole model passes: the row is a kink, not a
    failure (before the rule, a mismatch)."""
    from gradcli.model.loading import load_model

    model = load_model(fixture("by_layer_kinks_at_point.py"))
    x = model.point["x"]
    on_kinks = x[4:] @ model.point["hidden/kernel"] + model.point["hidden/bias"]
    assert np.count_nonzero(on_kinks == 0.0) == on_kinks.size == 4 * 32
    run = gradcli("check", fixture("by_layer_kinks_at_point.py"), "--mode", "fast", "--by-layer", "--json")
    assert run.exit_code == 0, run
    (result,) = run.result["models"]
    (pair,) = result["pairs"]
    assert pair["input"] == "all 7 inputs jointly" and pair["verdict"] == "kink" and not pair["failed"]
    assert "at a nearby point" in pair["explanation"] and "passes" in pair["explanation"]
    assert all(not row["failed"] for row in result["layers"])
    # Each zero-row element moves its row's 32 relu kinks: shared, so the
    # layer's tie rule may judge them at nearby points (diagnose.shared_kinks).
    hidden = next(r for r in result["layers"] if r["path"] == "net/hidden")
    (inputs,) = [p for p in hidden["pairs"] if p["input"] == "inputs"]
    assert inputs["kinks_shared"] is True and not inputs["failed"]


@pytest.mark.parametrize("model", ["by_layer_kinks_bad_loss.py", "by_layer_kinks_cancel_bad_loss.py"])
def test_a_wrong_loss_at_exact_kinks_fails_at_the_nearby_point_too(model):
    """The networks of by_layer_kinks_at_point.py and by_layer_kinks_cancel.py
    (activations exactly on their kinks; in the second the kinks cancel)
    trained with a custom loss whose gradient is 3/4 of the true one: no layer
    holds the bug, the joint row fails, and the nearby point confirms it."""
    run = gradcli("check", fixture(model), "--mode", "fast", "--by-layer", "--json")
    assert run.exit_code == 1, run
    (result,) = run.result["models"]
    (pair,) = result["pairs"]
    assert pair["failed"] and pair["verdict"] == "mismatch"
    assert any("at a nearby point" in w and "fails too" in w for w in pair["warnings"])
    assert all(not row["failed"] for row in result["layers"])


@pytest.mark.parametrize("autodiff, said", [
    ("both", "; forward mode agrees (along joint probe 0)"),
    ("reverse", ""),
])
def test_a_failing_joint_row_names_forward_mode_only_where_it_was_taken(autodiff, said):
    """The joint row's reverse-mode projections disagree (a wrong Swish inside):
    forward mode is taken along joint probe 0 only, and not at all with
    ``--autodiff reverse``; the explanation said "forward mode agrees" either way."""
    run = gradcli("check", fixture("by_layer_modules.py"), "--mode", "fast", "--layers", "blocks/1*",
                  "--autodiff", autodiff, "--json")
    assert run.exit_code == 1, run
    (result,) = run.result["models"]
    joint = next(p for p in result["pairs"] if p["input"].endswith("inputs jointly"))
    assert joint["verdict"] == "mismatch"
    assert joint["explanation"] == "reverse mode (the gradient) disagrees with finite differences" + said


def test_kinks_that_cancel_through_the_chain_rule_are_judged_at_a_nearby_point():
    """relu(z) - relu(-z) is z: the network is linear, and differentiable along
    every direction, but on its padding rows z is exactly 0 and the chain rule
    through each relu's gradient (0 at 0) gives 0 there. Closed form (numpy,
    float64): the input gradient of sum(c * output) is c W2^T W1^T on every
    row; TensorFlow's is that on the data rows and 0 on the padding rows. So
    the joint row's one-sided slopes agree with each other and not with the
    analytic value (a clean mismatch, as NASNetMobile's at initialization);
    every layer passes or is a kink, and at a nearby point the whole model
    passes: the row is a kink, not a failure (before the rule, exit 1)."""
    import tensorflow as tf

    from gradcli.model.loading import import_model_file

    module = import_model_file(fixture("by_layer_kinks_cancel.py"))
    x = module.inputs(np.random.default_rng(0))["x"]
    w1, b1 = (np.asarray(w, np.float64) for w in module.model.get_layer("pre").weights)
    w2 = np.asarray(module.model.get_layer("head").weights[0], np.float64)
    assert np.all(b1 == 0.0) and np.all(x[4:] == 0.0)  # the padding rows' pre-activations are exactly 0
    c = np.random.default_rng(1).standard_normal((8, 3))
    exact = c @ w2.T @ w1.T
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        s = tf.reduce_sum(module.model(xt) * tf.constant(c, tf.float32))
    taped = tape.gradient(s, xt).numpy()
    np.testing.assert_allclose(taped[:4], exact[:4], rtol=1e-4, atol=1e-5)
    assert np.all(taped[4:] == 0.0) and np.min(np.abs(exact[4:])) > 1e-3

    run = gradcli("check", fixture("by_layer_kinks_cancel.py"), "--mode", "fast", "--by-layer", "--json")
    assert run.exit_code == 0, run
    (result,) = run.result["models"]
    (pair,) = result["pairs"]
    assert pair["input"].endswith("inputs jointly") and pair["verdict"] == "kink" and not pair["failed"]
    assert "agree with each other but not with the analytic value" in pair["explanation"]
    assert "at a nearby point" in pair["explanation"] and "passes" in pair["explanation"]
    rows = {row["path"]: row for row in result["layers"]}
    assert all(not row["failed"] for row in rows.values())
    assert rows["net/up"]["verdict"] == rows["net/down"]["verdict"] == "kink"


@pytest.mark.parametrize("name", ["by_layer_functional.py", "by_layer_dead_unit.py"])
def test_the_joint_check_streams_its_probes_with_the_same_draws_and_verdicts(monkeypatch, name):
    """A model too large to hold every probe's joint directions (BERT-base:
    0.87 GB a probe in float64) is checked a probe at a time (``JointDraws``,
    ``JOINT_CHUNK_BYTES``). Forced here on small models (a wrong Swish inside:
    a mismatch; a dead relu unit: a kink along the probes): one probe per
    chunk draws the directions numpy draws at once from the seed, and gives
    the verdicts, projections and power of the check that holds them all."""
    from gradcli.analyses.check import check_model, joint
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    options = CheckOptions(mode="fast", by_layer=True)
    model = load_model(fixture(name))
    held = check_model(model, options)
    drawn = []
    monkeypatch.setattr(joint, "JOINT_CHUNK_BYTES", 1)
    monkeypatch.setattr(joint.JointDraws, "tangents", lambda self, probes, taken=joint.JointDraws.tangents:
                        drawn.append(list(probes)) or taken(self, probes))
    streamed = check_model(load_model(fixture(name)), options)
    assert drawn[:3] == [[0], [1], [2]]  # the first pass: one probe's directions at a time

    # The directions: as numpy draws them at once (cotangents first, then each input's).
    from gradcli.numerics.finite_diff import FiniteDifferences

    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=list(model.wrt), joint=True)
    draws = joint.JointDraws(model, list(model.outputs), 3, options.rng_seed, fd)
    rng = np.random.default_rng(options.rng_seed)
    for o in model.outputs:
        assert np.array_equal(draws.cotangents[o], rng.standard_normal((3,) + np.shape(model.outputs[o])))
    expected = {n: rng.standard_normal((3,) + np.shape(model.point[n])).astype(model.point[n].dtype)
                for n in model.wrt}
    # [0] first: drawn while the generator's states were recorded; then again from its state.
    for chunk in ([0], [2], [0, 1], [1], [0]):
        taken = draws.tangents(chunk)
        for n in model.wrt:
            assert np.array_equal(taken[n], expected[n][chunk])
            assert np.shares_memory(taken[n], taken.block)  # each input's view into one block
        assert fd.joint_steps(taken)[1] is taken.block  # differenced as it is: no copy of the directions

    for a, b in zip(held.pairs, streamed.pairs, strict=True):
        assert a.input.endswith("inputs jointly")
        assert (a.verdict, a.failed, a.explanation) == (b.verdict, b.failed, b.explanation)
        # Sums taken input by input rather than over one joined copy: equal up to round-off.
        assert b.power.absolute == pytest.approx(a.power.absolute, rel=1e-12)
        assert (b.worst.analytic, b.worst.numeric) == pytest.approx((a.worst.analytic, a.worst.numeric), rel=1e-12)
    assert [(r.path, r.verdict) for r in held.layers] == [(r.path, r.verdict) for r in streamed.layers]


def test_the_round_off_retry_holds_two_chunks_of_joint_directions_between_its_scales(monkeypatch):
    """The round-off retry's passes take no VJPs, so it holds the directions of
    ``RETRY_HELD_CHUNKS`` chunks between its step scales (``JointDraws.holding``):
    each pass starts with the chunks held and draws the rest, one of three
    chunks a pass after the first. The directions are numpy's draws from the
    seed, the differences along them the same numbers as along directions
    drawn afresh, and nothing is held after the retry."""
    from gradcli.analyses.check import joint
    from gradcli.analyses.check.rules import RETRY_HELD_CHUNKS
    from gradcli.model.loading import load_model
    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.options import CheckOptions
    from gradcli.verdicts import compare

    monkeypatch.setattr(joint, "JOINT_CHUNK_BYTES", 1)  # a chunk a probe, as BERT-base's
    options = CheckOptions(mode="fast", by_layer=True)
    model = load_model(fixture("by_layer_functional.py"))
    fd = FiniteDifferences(model.function, model.point, list(model.outputs), wrt=list(model.wrt), joint=True)
    check = joint.JointCheck(model, list(model.outputs), fd, compare.tolerance(str(model.dtype), None, None), options)
    draws = check.draws = joint.JointDraws(model, list(model.outputs), 3, options.rng_seed, fd)
    rng = np.random.default_rng(options.rng_seed)
    for o in model.outputs:
        rng.standard_normal((3,) + np.shape(model.outputs[o]))
    expected = {n: rng.standard_normal((3,) + np.shape(model.point[n])).astype(model.point[n].dtype)
                for n in model.wrt}
    for c in draws.chunks:
        draws.tangents(c)  # the first pass's draws (the first chunk's taken while recording)
    afresh = {scale: check.along_joint(scale) for scale in (10.0, 100.0)}  # nothing held: each chunk drawn

    served, taken = [], joint.JointDraws.tangents
    monkeypatch.setattr(joint.JointDraws, "tangents", lambda self, probes: served.append(
        (list(probes), len(self._kept))) or taken(self, probes))
    drawn = []
    monkeypatch.setattr(joint.held, "normals", lambda rng, normals=joint.held.normals: drawn.append(1) or normals(rng))
    with draws.holding(RETRY_HELD_CHUNKS):
        passes = []
        for scale in (10.0, 100.0, 10.0):
            before = len(drawn)
            held = {key: draws._kept[key] for key in draws._kept}
            derivatives = check.along_joint(scale)
            passes.append((len(drawn) - before, [p for p, _ in served[-3:]]))
            for key, directions in held.items():  # served again as they were: not drawn
                if key in draws._kept:
                    assert draws._kept[key] is directions
            assert all(count <= RETRY_HELD_CHUNKS for _, count in served)  # never more held
            reference = afresh[scale]
            for o in model.outputs:
                np.testing.assert_array_equal(derivatives.values[o], reference.values[o])
                np.testing.assert_array_equal(derivatives.errors[o], reference.errors[o])
            for key, directions in draws._kept.items():
                for n in model.wrt:
                    assert np.array_equal(directions[n], expected[n][list(key)])
        inputs = len(model.wrt)
        # Draws count one per (input, probe): the first pass all three probes,
        # then one chunk a pass, the two held served first.
        assert [count for count, _ in passes] == [3 * inputs, inputs, inputs]
        assert passes[1][1] == [[1], [2], [0]] and passes[2][1] == [[2], [0], [1]]
    assert not draws._kept


def _joint_threads(monkeypatch):
    """Record the thread each whole-model joint check runs on."""
    import threading

    from gradcli.analyses import check

    threads, run = [], check.JointCheck.run

    def recording(self):
        threads.append(threading.current_thread().name)
        return run(self)

    monkeypatch.setattr(check.JointCheck, "run", recording)
    return threads


def test_the_joint_check_runs_beside_the_layer_pass_with_the_same_numbers(monkeypatch):
    import dataclasses
    import threading

    from gradcli.analyses.check import check_model
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    threads = _joint_threads(monkeypatch)
    options = CheckOptions(mode="fast", by_layer=True)
    model = load_model(fixture("by_layer_functional.py"))
    assert model.pure_call  # a functional model's float64 clone, inference mode
    beside = check_model(model, options)
    alone = check_model(dataclasses.replace(model, pure_call=False), options)
    assert threads == ["gradcli-joint-check", threading.current_thread().name]
    assert not any(t.name == "gradcli-joint-check" for t in threading.enumerate())
    # The same draws, the same steps, the same verdicts: running beside changes
    # when the numbers are computed, not what they are.
    for a, b in zip(beside.pairs, alone.pairs, strict=True):
        assert (a.input, a.verdict, a.failed) == (b.input, b.verdict, b.failed) == ("all 5 inputs jointly", "mismatch", True)
        assert a.power.absolute == b.power.absolute
        assert (a.explanation, a.warnings) == (b.explanation, b.warnings)
    assert [(r.path, r.verdict) for r in beside.layers] == [(r.path, r.verdict) for r in alone.layers]
    assert [r.path for r in beside.layers if r.failed] == ["net/swish"]


def test_a_model_whose_trace_calls_a_function_has_its_joint_check_after_the_pass(monkeypatch):
    """The same network with its activation's body a tf.function: its trace
    holds a call, so forward mode is also taken with the functions run
    eagerly, a switch TensorFlow holds for the whole process. The joint
    check runs after the layer pass, on the caller's thread; it is taken
    both ways and passes, and the switch is off afterwards."""
    import threading

    import tensorflow as tf

    from gradcli.analyses.check import check_model
    from gradcli.model.loading import load_model
    from gradcli.numerics import autodiff
    from gradcli.options import CheckOptions

    threads = _joint_threads(monkeypatch)
    entered = []
    switch = autodiff.functions_run_eagerly

    def recording():
        entered.append(threading.current_thread().name)
        return switch()

    monkeypatch.setattr(autodiff, "functions_run_eagerly", recording)
    model = load_model(fixture("by_layer_calls_function.py"))
    assert model.pure_call
    result = check_model(model, CheckOptions(mode="fast", by_layer=True))
    assert threads == [threading.current_thread().name]
    assert entered and set(entered) == {threading.current_thread().name}
    assert not tf.config.functions_run_eagerly()
    (joint,) = result.pairs
    assert (joint.input, joint.verdict) == ("all 5 inputs jointly", "pass")
    assert [r.path for r in result.layers if r.failed] == []


@pytest.mark.parametrize("beside_the_last", [True, False])
def test_the_joint_check_waits_for_the_layers_it_fits_the_memory_limit_beside_only_one_at_a_time(
        monkeypatch, beside_the_last):
    """Each of the two checks fits the limit alone (their guards pass), but
    the joint check and some layer's check not at once: the joint check starts
    once those layers are checked (on its own thread), or runs after the pass
    when the last layer is one of them (on the caller's); a note says which
    and why; the numbers are those of the run beside every layer.
    Truth: by_layer_functional.py's predicted peaks, read from the two guards:
    its first layer (net/d1) needs the most, its last (net/d2) the next most;
    the limit is set between the joint check plus one and plus the other, or
    above every check alone and below the joint check plus net/d2."""
    import threading

    from gradcli.analyses.check import JointCheck, check_model
    from gradcli.analyses.check.mode import require_joint_memory
    from gradcli.analyses.layers import run as layer_run
    from gradcli.analyses.layers.plan import plan_layers
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    model = load_model(fixture("by_layer_functional.py"))
    options = CheckOptions(mode="fast", by_layer=True)
    joint = require_joint_memory(model, sum(int(np.size(model.point[n])) for n in model.wrt), options)
    plan = plan_layers(model, options)
    assert 0 < min(joint, *plan.unit_memory.values())
    need = {key[0]: joint + plan.memory(key) for key in plan.unit_memory}
    assert list(need) == ["net/d1", "net/swish", "net/d2"]
    assert need["net/d1"] > need["net/d2"] > need["net/swish"]
    alone = max(joint, *(plan.memory(k) for k in plan.unit_memory))
    if beside_the_last:  # only net/d1 is too large beside the joint check
        limit = (need["net/d1"] + need["net/d2"]) // 2
    else:  # net/d2, the last, is too
        assert need["net/d2"] > alone
        limit = (alone + need["net/d2"]) // 2
    assert alone <= limit

    events = []  # the joint check's start and each layer's end, in order
    threads = _joint_threads(monkeypatch)
    run, checked = JointCheck.run, layer_run._check_call

    def layer_checked(parent, call, *args):
        result = checked(parent, call, *args)
        events.append(call.path)
        return result

    monkeypatch.setattr(JointCheck, "run", lambda self: events.append("joint") or run(self))
    monkeypatch.setattr(layer_run, "_check_call", layer_checked)
    beside = check_model(model, options)
    assert events[0] == "joint"  # beside every layer: started before the pass
    events.clear()
    waited = check_model(model, CheckOptions(mode="fast", by_layer=True, max_memory=limit))
    notes = [n for n in waited.notes if n.startswith("the whole-model joint check")]
    assert not any(n.startswith("the whole-model joint check ran after") or "started once" in n for n in beside.notes)
    assert len(notes) == 1
    if beside_the_last:
        assert events.index("joint") > events.index("net/d1")  # not beside net/d1
        assert threads == ["gradcli-joint-check", "gradcli-joint-check"]
        assert notes[-1].startswith("the whole-model joint check started once layer net/d1 was checked, not "
                                    "beside it: beside it they would need about")
    else:
        assert events[-1] == "joint" and threads == ["gradcli-joint-check", threading.current_thread().name]
        assert notes[-1].startswith("the whole-model joint check ran after the layer pass, not beside it: "
                                    "beside layer net/d1 they would need about")
    for a, b in zip(beside.pairs, waited.pairs, strict=True):
        assert (a.input, a.verdict, a.failed) == (b.input, b.verdict, b.failed) == ("all 5 inputs jointly", "mismatch", True)
        assert a.power.absolute == b.power.absolute
        assert (a.explanation, a.warnings) == (b.explanation, b.warnings)
    assert [(r.path, r.verdict) for r in beside.layers] == [(r.path, r.verdict) for r in waited.layers]


@pytest.mark.parametrize("name", ["by_layer_subclassed.py", "by_layer_modules.py", "keras_training_mode.py"])
def test_a_model_whose_checks_share_state_is_checked_one_step_after_the_other(name):
    # Dtype policies switched for float64 (a subclassed model), weights set as
    # attributes (tf.Modules), statistics updated by the user's own layers in
    # training mode: the two checks would see each other's state.
    from gradcli.model.loading import load_model

    assert not load_model(fixture(name)).pure_call


def test_a_failing_layer_pass_leaves_no_joint_check_running(monkeypatch):
    import threading

    from gradcli.analyses.check import model as check_module
    from gradcli.analyses.check import check_model
    from gradcli.errors import GradcliError
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    threads = _joint_threads(monkeypatch)

    def failing(*args, **kwargs):
        raise GradcliError("the layer pass could not run")

    monkeypatch.setattr(check_module, "check_layers", failing)
    with pytest.raises(GradcliError, match="the layer pass could not run"):
        check_model(load_model(fixture("by_layer_functional_ok.py")), CheckOptions(mode="fast", by_layer=True))
    assert threads == ["gradcli-joint-check"]
    assert not any(t.name == "gradcli-joint-check" for t in threading.enumerate())


def test_an_interrupted_layer_pass_does_not_wait_for_the_joint_check(monkeypatch):
    import threading

    from gradcli.analyses import check
    from gradcli.analyses.check import model as check_module
    from gradcli.analyses.check import check_model
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    release, started = threading.Event(), threading.Event()

    def slow_joint(self):  # a joint check still running when the pass is interrupted
        started.set()
        release.wait(60)
        return []

    def interrupted(*args, **kwargs):
        started.wait(60)
        raise KeyboardInterrupt

    monkeypatch.setattr(check.JointCheck, "run", slow_joint)
    monkeypatch.setattr(check_module, "check_layers", interrupted)
    model = load_model(fixture("by_layer_functional_ok.py"))
    try:
        with pytest.raises(KeyboardInterrupt):
            check_model(model, CheckOptions(mode="fast", by_layer=True))
        assert any(t.name == "gradcli-joint-check" for t in threading.enumerate())  # not waited for
    finally:
        release.set()


def test_a_joint_check_outlasting_the_layer_pass_shows_as_a_stage(monkeypatch):
    import time

    from gradcli import progress
    from gradcli.analyses import check
    from gradcli.analyses.check import model as check_module
    from gradcli.analyses.check import JOINT_STAGE, check_model
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    run = check.JointCheck.run

    def slow_joint(self):
        time.sleep(2.5)
        return run(self)

    monkeypatch.setattr(check.JointCheck, "run", slow_joint)
    monkeypatch.setattr(check_module, "check_layers", lambda model, options, plan=None, unit_done=None: ([], []))
    reports = []
    with progress.listening(lambda stage, done, total, detail: reports.append((stage, done, total, detail))):
        result = check_model(load_model(fixture("by_layer_functional_ok.py")), CheckOptions(mode="fast", by_layer=True))
    waiting = [r for r in reports if r[0] == JOINT_STAGE]
    assert waiting[0] == (JOINT_STAGE, 0, None, "all 5 inputs jointly")
    assert waiting[-1] == (JOINT_STAGE, 1, 1, "all 5 inputs jointly") and len(waiting) >= 3
    assert [p.verdict for p in result.pairs] == ["pass"]


def test_the_layer_stage_names_the_unit_being_checked_while_it_runs():
    """A line printed while a slow unit runs names that unit, with the pass's
    estimate up front, not the unit checked before it (a BERT-base's failing
    layer ran for two minutes under the name of the layer before it): each
    unit's check after the first starts with its own report (the first, with
    the stage's: the estimate; a report of 0 done restarts a stage), and
    ends with the count."""
    from gradcli import progress
    from gradcli.analyses.check import check_model
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    reports = []
    with progress.listening(lambda stage, done, total, detail: reports.append((stage, done, total, detail))):
        check_model(load_model(fixture("by_layer_functional.py")), CheckOptions(mode="fast", by_layer=True))
    layers = [r[1:] for r in reports if r[0] == "layers"]
    estimated = layers[0][2]
    assert layers[0][:2] == (0, 3) and estimated.startswith("estimated ") and estimated.endswith(" s")
    assert [r for r in layers if r[0] == 0] == [(0, 3, estimated)]
    for k, path in enumerate(["net/swish", "net/d2"], start=1):
        started, ended = layers.index((k, 3, f"{path}; {estimated} up front")), layers.index((k + 1, 3, path))
        assert started < ended


def test_activations_are_captured_from_the_capturing_thread_only():
    # The joint check runs the same layers beside the pass: its calls must not
    # be recorded as more calls of the units (a layer would read "call 1 of 2").
    import threading

    import keras
    import numpy as np

    from gradcli.analyses.layers.capture import _record

    dense = keras.layers.Dense(2, name="only")
    x = np.ones((1, 3), "float32")
    dense(x)
    sink = []
    with _record({id(dense): "only"}, sink, keep=False):
        dense(x)
        other = threading.Thread(target=lambda: dense(x))
        other.start()
        other.join()
    assert [(c.path, c.index) for c in sink] == [("only", 1)]


def test_the_power_column_is_a_percentage_below_the_rms_element_and_a_multiple_above():
    """A Rescaling layer's gradient is a sparse diagonal: its RMS element is
    small, and the smallest error its projections see is 47.7 times it. The
    table says ``47.7x`` (it said ``4.77e+03%``); a dense layer's 3.2% stays a
    percentage."""
    from types import SimpleNamespace

    from gradcli.render.text import render_layers
    from gradcli.render.text import plain_text
    from gradcli.results import Power
    from gradcli.results.by_layer import LayerResult

    def layer(name, class_name, relative):
        return LayerResult(
            name=name, path=f"net/{name}", class_name=class_name, call_site="", call_index=1, calls=1,
            weights=0, elements=64, mode="fast", verdict="pass", failed=False,
            power=Power(absolute=relative * 0.01, relative=relative, element_size=0.01, probability=0.95, probes=3),
        )

    model = SimpleNamespace(layers=[layer("rescaling", "Rescaling", 47.7), layer("dense", "Dense", 0.032)])
    text = plain_text(lambda out: render_layers(model, out))
    rows = {line.split("│")[1].strip(): line.split("│")[6].strip() for line in text.splitlines() if line.startswith("│")}
    assert rows == {"net/rescaling": "47.7x", "net/dense": "3.2%"}, text


# --- layer units that no TensorFlow path crosses ------------------------------------


def test_a_frozen_position_embedding_is_a_disconnected_row_and_the_run_passes():
    """keras-hub's PositionEmbedding reads only its input's shape, and frozen it
    holds no weight: its unit is checked like any other (no error row), every
    pair disconnected with a numeric derivative of exactly zero, and the run
    passes (tests/models/layers_shape_only.py)."""
    pytest.importorskip("keras_hub")
    run = gradcli("check", fixture("layers_shape_only.py"), "--by-layer", "--json")
    assert run.exit_code == 0, run
    (model,) = run.result["models"]
    rows = {row["class_name"]: row for row in model["layers"]}
    row = rows["PositionEmbedding"]
    assert (row["verdict"], row["failed"], row["error"], row["weights"]) == ("disconnected", False, None, 0), row
    assert row["elements"] == 32  # its input x, [1, 4, 8], checked element by element
    for pair in row["pairs"]:
        assert pair["verdict"] == "disconnected" and not pair["failed"], pair
        assert pair["worst"]["numeric"] == 0.0 and pair["worst"]["analytic"] == 0.0, pair
    assert rows["Dense"]["verdict"] == "pass"


def test_a_layer_computed_in_numpy_fails_its_row_with_the_numeric_derivative():
    """A layer that leaves TensorFlow (``.numpy()``) beside a Dense layer
    (tests/models/layers_numpy_inside.py): its unit cannot be traced, so it is
    checked through its own eager call, and fails as disconnected although
    its output c_b sum_j tanh(x_bj) changes with x: the numeric derivatives
    are c_b (1 - tanh(x_bj)^2), one factor per row. The whole model's pair
    misses exactly that part: numeric - analytic = 1 - tanh(x)^2."""
    x = np.random.default_rng(0).standard_normal((2, 3))
    run = gradcli("check", fixture("layers_numpy_inside.py"), "--by-layer", "--json")
    assert run.exit_code == 1, run
    (model,) = run.result["models"]
    row = next(r for r in model["layers"] if r["class_name"] == "NumpyTanh")
    assert (row["verdict"], row["failed"], row["error"]) == ("disconnected", True, None), row
    (pair,) = row["pairs"]
    assert pair["failed"] and pair["n_failing"] == 6, pair
    assert "conversion to numpy" in pair["explanation"] and "layers_numpy_inside.py:" in pair["explanation"]
    factors = {}
    for element in pair["failing"]:
        b, j = element["input_index"]
        assert element["analytic"] == 0.0
        factors.setdefault(b, []).append(element["numeric"] / (1 - np.tanh(x[b, j]) ** 2))
    assert len(factors) == 2 and all(len(f) == 3 for f in factors.values())
    for found in factors.values():
        np.testing.assert_allclose(found, found[0], rtol=1e-8)  # one cotangent c_b per row
    whole = next(p for p in model["pairs"] if p["input"] == "x")
    assert whole["verdict"] == "mismatch" and whole["failed"] and whole["failing"], whole
    for element in whole["failing"]:
        (b, _), (b_in, j) = element["output_index"], element["input_index"]
        expected = (1 - np.tanh(x[b_in, j]) ** 2) if b == b_in else 0.0
        np.testing.assert_allclose(element["numeric"] - element["analytic"], expected, rtol=1e-7, atol=1e-9)


def test_a_model_with_two_outputs_gets_a_joint_row_for_each_output():
    """Fast with the layer pass, the joint check judges each output on its own
    row, forward mode taken along the joint probe for each: every layer is
    Keras' own, so both rows and every layer pass. (The second row once ended
    the check with an internal error: the first row's forward-mode note
    rebound the number of probes the rows are shaped by.)"""
    import gradcli
    from gradcli.analyses.check.joint import joint_input

    result = gradcli.check(fixture("by_layer_two_heads.py"), mode="fast", by_layer=True)
    (model,) = result.models
    assert model.error is None, model.error
    label = joint_input(7)  # x and the kernel and bias of trunk, head_a and head_b
    rows = {p.output: p for p in model.pairs if p.input == label}
    assert sorted(rows) == ["a", "b"], [(p.input, p.output) for p in model.pairs]
    assert all(p.verdict == "pass" and not p.failed for p in rows.values()), rows
    assert model.layers and not any(r.failed for r in model.layers)
    assert result.ok


def test_an_input_inconclusive_at_the_default_step_is_settled_by_the_round_off_retry_through_the_trace(
        monkeypatch):
    """Keras' MultiHeadAttention with large values: the key bias's derivative
    is exactly 0 (the softmax ignores a shift shared by every key of a query),
    and the quick check's projections of it at the default step are
    round-off, inconclusive. The quick check retries it as ``FastCheck.run``
    does (``ROUNDOFF_RETRY``), the points at each larger step taken through
    the unit's trace: at 256 times the step they agree, and the unit is
    settled there. (The key bias once went alone to ``check_model`` on the
    unit's eager call: another trace of the layer and eager JVPs, 0.7-3 s of
    each BERT-base layer.) With every input settled, forward mode is checked
    along the joint tangent of all ten: the JVPs the unit's first traced call
    took, with no call for JVPs alone. Truth for those: the eager JVPs along
    that tangent (TensorFlow's ForwardAccumulator op by op), to round-off."""
    import gradcli
    from gradcli.analyses.check.products import ModelProducts
    from gradcli.analyses.layers import quick, traces

    taken, served, eagerly = [], quick.TracedProducts.batched_jvp, ModelProducts.batched_jvp
    points, probe = [], traces.Traced.probe

    def spy(self, tangents, outputs):
        jvps = served(self, tangents, outputs)
        taken.append((tuple(tangents), jvps, eagerly(self.fallback, tangents, outputs)))
        return jvps

    monkeypatch.setattr(quick.TracedProducts, "batched_jvp", spy)
    monkeypatch.setattr(traces.Traced, "probe", lambda self, *a: points.append(len(a[4][0])) or probe(self, *a))
    result = gradcli.check(fixture("by_layer_attention_key_bias.py"), mode="fast", by_layer=True)
    (model,) = result.models
    assert model.error is None, model.error
    (attention,) = [r for r in model.layers if r.path.endswith("/attention")]
    assert attention.mode == "fast" and attention.verdict == "pass" and not attention.failed
    assert not any("checked again on their own" in n for n in attention.notes), attention.notes
    pairs = {p.input: p for p in attention.pairs}
    inputs = ("query", "value", "query/kernel", "query/bias", "key/kernel", "key/bias",
              "value/kernel", "value/bias", "attention_output/kernel", "attention_output/bias")
    assert tuple(pairs) == inputs
    assert all(p.verdict == "pass" for p in pairs.values())
    key_bias = pairs.pop("key/bias")
    assert [w for w in key_bias.warnings if "at 256 times the step they agree" in w
            and w.startswith("at the default step round-off left the projections inconclusive")], key_bias.warnings
    assert not any(p.warnings for p in pairs.values())
    assert result.ok
    (names, jvps, eager), = [t for t in taken if "query" in t[0]]
    assert names == inputs and 0 not in points  # no call planning no point (JVPs alone)
    (o,) = jvps
    np.testing.assert_allclose(jvps[o], eager[o], rtol=1e-10)


def test_batched_points_are_each_point_evaluated_alone(monkeypatch):
    """A signature whose points are predicted to take long
    (``plan.BATCHED_MIN_SECONDS``, here 0: every fast unit) evaluates each
    input's planned points in batches (``traces.batched_points``, pfor).
    Truth: every planned point evaluated alone through the unit's local
    function, x_m + s u_m[p] formed in numpy, to round-off. The round-off
    retry of the key bias (the other inputs' batches hold no point) runs
    through the same trace, and every verdict and warning is the one-by-one
    evaluation's (the key bias's round-off figures aside: its derivative is
    exactly 0, so its differences are round-off, which batching rounds
    otherwise)."""
    import re

    import tensorflow as tf

    import gradcli
    from gradcli.analyses.layers import plan, traces

    def rows(result):
        (model,) = result.models
        assert model.error is None, model.error
        figures = lambda text: re.sub(r"\d[\d.e+-]*", "#", text)  # noqa: E731
        return {(r.path, p.input): (p.verdict, p.failed, tuple(map(figures, p.warnings)))
                for r in model.layers for p in r.pairs}

    one_by_one = rows(gradcli.check(fixture("by_layer_attention_key_bias.py"), mode="fast", by_layer=True))
    taken, probe, points = [], traces.Traced.probe, traces.Traced.points
    monkeypatch.setattr(plan, "BATCHED_MIN_SECONDS", 0.0)

    def probed(self, *args):
        products = probe(self, *args)
        taken.append((self, args, products[0]))
        return products

    def pointed(self, *args):
        taken.append((self, args, points(self, *args)))
        return taken[-1][2]

    monkeypatch.setattr(traces.Traced, "probe", probed)
    monkeypatch.setattr(traces.Traced, "points", pointed)
    batched = rows(gradcli.check(fixture("by_layer_attention_key_bias.py"), mode="fast", by_layer=True))
    assert batched == one_by_one
    assert {traced.batched for traced, _, _ in taken} == {True}
    retried = [args for _, args, _ in taken if len(set(args[4][0])) == 1]
    assert retried  # the key bias's larger steps: one input's points
    for traced, (values, frozen, cotangents, tangents, (which, probes, signed), *_), evaluated in taken:
        for i, (m, p, s) in enumerate(zip(which, probes, signed)):
            moved = [np.asarray(v) for v in values]
            moved[m] = moved[m] + s * np.asarray(tangents[m])[p]
            alone = traced.value([tf.constant(v) for v in moved], frozen, cotangents)
            np.testing.assert_allclose(evaluated[i], np.asarray(alone), rtol=1e-12)


def _quick_retry_settles_nothing(monkeypatch):
    """The quick check's round-off retry leaves every inconclusive pair as it
    is (as where even 4096 times the step is round-off); ``check_model``'s
    retry is untouched."""
    from gradcli.analyses.check.full import FullCheck
    from gradcli.analyses.layers import quick

    inside, retry, run_traced = [], FullCheck.retry_larger_step, quick.run_traced

    def traced(*args):
        inside.append(True)
        try:
            return run_traced(*args)
        finally:
            inside.pop()

    def retried(pair, compared_at, what="projections"):
        return pair if inside else retry(pair, compared_at, what)

    monkeypatch.setattr(quick, "run_traced", traced)
    monkeypatch.setattr(FullCheck, "retry_larger_step", staticmethod(retried))


def test_an_input_the_quick_retry_leaves_inconclusive_is_checked_alone_and_the_others_keep_their_verdicts(
        monkeypatch):
    """The same layer with the quick check's retry settling nothing: the key
    bias is left inconclusive there. The layer once went whole to
    check_model (every input again) and stayed inconclusive there: a correct
    layer failed. The other nine inputs keep the quick check's passes, the
    key bias alone is checked again on the unit's eager call, and its
    round-off retry confirms the 0 at 256 times the step."""
    import gradcli

    _quick_retry_settles_nothing(monkeypatch)
    result = gradcli.check(fixture("by_layer_attention_key_bias.py"), mode="fast", by_layer=True)
    (model,) = result.models
    assert model.error is None, model.error
    (attention,) = [r for r in model.layers if r.path.endswith("/attention")]
    assert attention.mode == "fast" and attention.verdict == "pass" and not attention.failed
    assert "9 of 10 inputs settled by the quick check's projections; checked again on their own, their " \
           "projections inconclusive: key/bias" in attention.notes
    pairs = {p.input: p for p in attention.pairs}
    assert list(pairs) == ["query", "value", "query/kernel", "query/bias", "key/kernel", "key/bias",
                           "value/kernel", "value/bias", "attention_output/kernel", "attention_output/bias"]
    assert all(p.verdict == "pass" for p in pairs.values())
    key_bias = pairs.pop("key/bias")
    assert any("at 256 times the step they agree" in w for w in key_bias.warnings), key_bias.warnings
    assert not any(p.warnings for p in pairs.values())  # the quick check's own passes
    assert result.ok


def test_forward_mode_of_the_settled_inputs_is_the_traces_jvp_along_their_joint_tangent(monkeypatch):
    """With the key bias left unsettled (``_quick_retry_settles_nothing``),
    forward mode is still checked for the
    other nine inputs along their joint tangent (the key bias's tangent zero),
    and taken from the unit's own trace, not eagerly op by op (4.7 s of a
    7.1M-weight BERT layer's 19). Independent truth: the eager
    forward-mode JVPs of the unit's function along that tangent (TensorFlow's
    ForwardAccumulator running the layer op by op), equal to round-off."""
    import gradcli
    from gradcli.analyses.check.products import ModelProducts
    from gradcli.analyses.layers import quick

    taken, served, eagerly = [], quick.TracedProducts.batched_jvp, ModelProducts.batched_jvp
    eager_calls = []

    def spy(self, tangents, outputs):
        jvps = served(self, tangents, outputs)
        taken.append((tuple(tangents), jvps, eagerly(self.fallback, tangents, outputs)))
        return jvps

    _quick_retry_settles_nothing(monkeypatch)
    monkeypatch.setattr(quick.TracedProducts, "batched_jvp", spy)
    monkeypatch.setattr(ModelProducts, "batched_jvp", lambda self, *a: eager_calls.append(a) or eagerly(self, *a))
    result = gradcli.check(fixture("by_layer_attention_key_bias.py"), mode="fast", by_layer=True)
    assert result.ok
    (names, jvps, eager), = [t for t in taken if "query" in t[0]]
    # No eager JVP of the nine: the key bias's check_model alone takes its own.
    assert all("query" not in tangents for tangents, _ in eager_calls), [list(t) for t, _ in eager_calls]
    assert names == ("query", "value", "query/kernel", "query/bias", "key/kernel",
                     "value/kernel", "value/bias", "attention_output/kernel", "attention_output/bias")
    (o,) = jvps
    assert np.shape(jvps[o]) == (3,) and np.all(np.abs(jvps[o]) > 0)
    np.testing.assert_allclose(jvps[o], eager[o], rtol=1e-10)


def test_the_quick_checks_draws_are_fastchecks_from_the_seed_and_kept_for_the_same_shapes():
    """``quick.Draws`` draws what ``FastCheck.run`` draws from the check's seed
    (the cotangents, then each input's tangents in order, in the input's
    dtype), and serves the same arrays, read-only, to the next unit of those
    shapes. Truth: numpy's generator from the seed, drawn here."""
    from gradcli.analyses.layers.quick import Draws

    points = [np.zeros((2, 3), np.float32), np.zeros(4)]
    draws = Draws()
    cotangents, tangents, moves = draws.of(7, 3, (2,), points)
    rng = np.random.default_rng(7)
    np.testing.assert_array_equal(cotangents, rng.standard_normal((3, 2)))
    np.testing.assert_array_equal(tangents[0], rng.standard_normal((3, 2, 3)).astype(np.float32))
    np.testing.assert_array_equal(tangents[1], rng.standard_normal((3, 4)))
    assert tangents[0].dtype == np.float32 and tangents[1].dtype == np.float64
    for array, tensor in zip(tangents, moves):
        np.testing.assert_array_equal(tensor.numpy(), array)
    assert draws.of(7, 3, (2,), [np.ones((2, 3), np.float32), np.ones(4)]) == (cotangents, tangents, moves)
    with pytest.raises(ValueError, match="read-only"):
        tangents[1][0] = 1.0
    _, again, _ = draws.of(7, 3, (2,), [np.zeros((2, 3), np.float64), np.zeros(4)])  # another dtype: drawn again
    rng = np.random.default_rng(7)
    rng.standard_normal((3, 2))
    np.testing.assert_array_equal(again[0], rng.standard_normal((3, 2, 3)))
    assert draws.of(8, 3, (2,), points)[0][0, 0] != cotangents[0, 0]  # another seed


def test_units_of_one_shape_share_their_draws_and_every_figure_is_as_fresh_draws_give(monkeypatch):
    """Three Dense layers of one shape: the quick check draws once for the
    second and third (the first unit's draws are served again) and drops
    them after the third (no unit of its signature follows), and every
    figure of every unit is bit for bit what the pass gives when each unit
    draws afresh."""
    from gradcli.analyses.check import check_layers
    from gradcli.analyses.layers import quick
    from gradcli.model.loading import load_model
    from gradcli.options import CheckOptions

    def figures():
        model = load_model(fixture("by_layer_same_shapes.py"))
        results, _ = check_layers(model, CheckOptions(by_layer=True))
        assert [(r.label, r.mode, r.verdict) for r in results] == [
            (f"same_shapes/dense_{i}", "fast", "pass") for i in range(3)]
        return [[(p.input, p.verdict, p.max_abs_error, p.max_rel_error, p.fd_error, p.warnings) for p in r.pairs]
                for r in results]

    drawn, of, release = [], quick.Draws.of, quick.Draws.release

    def counted(self, *args):
        before = self.drawn
        served = of(self, *args)
        drawn.append(served is not before)
        return served

    released = []
    monkeypatch.setattr(quick.Draws, "of", counted)
    monkeypatch.setattr(quick.Draws, "release", lambda self: released.append(self.drawn is not None) or release(self))
    shared = figures()
    assert drawn == [True, False, False]
    assert released == [True]  # after the last unit alone: no unit of its signature follows
    monkeypatch.setattr(quick.Draws, "of", lambda self, *args: of(quick.Draws(), *args))
    assert figures() == shared


def test_the_whole_models_check_confirms_the_key_bias_zero_element_by_element():
    """The same model checked in full (the default): each element of the key
    bias's column is round-off at the default step (an error estimate of 2e-6
    against derivatives of 2.5e-7, inconclusive: a correct model failed) and
    still at 16 and 256 times the step; at 4096 times it they agree, a pass
    with a warning that says so. Every other pair passes at the default step."""
    import gradcli

    result = gradcli.check(fixture("by_layer_attention_key_bias.py"))
    (model,) = result.models
    assert model.mode == "full" and model.error is None, model.error
    pairs = {p.input: p for p in model.pairs}
    key_bias = pairs.pop("key/bias")
    assert key_bias.verdict == "pass"
    assert any("round-off left the elements inconclusive" in w and "at 4096 times the step they agree" in w
               for w in key_bias.warnings), key_bias.warnings
    assert all(p.verdict == "pass" and not p.warnings for p in pairs.values()), [
        (p.input, p.verdict, p.warnings) for p in pairs.values() if p.verdict != "pass" or p.warnings]
    assert result.ok


# --- a unit output holding its mask as -1e9 -----------------------------------------


def test_no_output_element_weighs_more_than_1024_times_the_median_in_the_units_scalar():
    """Hand-computed: the nonzero finite magnitudes 0.5, 1e9, 0.25 and 1 have the
    median 0.75, so the cap is 768; only the 1e9 element is weighed down, to
    768 / 1e9. Zeros and non-finite elements keep 1, and without an outlier
    every weight is 1 (c as the draw made it)."""
    from gradcli.analyses.layers.local import outlier_weights

    first, second = outlier_weights([np.array([0.5, -1e9, 0.25, 0.0]), np.array([[1.0, np.inf]])])
    np.testing.assert_array_equal(first, [1.0, 768.0 / 1e9, 1.0, 1.0])
    np.testing.assert_array_equal(second, [[1.0, 1.0]])
    (plain,) = outlier_weights([np.array([3.0, -2.0, 1e-3])])
    np.testing.assert_array_equal(plain, np.ones(3))


@pytest.mark.parametrize("name, wrong", [("by_layer_masked_bias.py", False), ("by_layer_masked_bias_wrong.py", True)])
def test_an_output_holding_its_mask_as_minus_1e9_leaves_the_other_changes_resolved(name, wrong):
    """A unit returns activations of size 5e-4 beside an attention bias holding
    its mask as -1e9. Its scalar weighed the -1e9 entries, whose round-off
    swamped every difference: the correct unit was inconclusive (error
    estimates 1e-5 against derivatives of 1e-4), and so was its twin whose tanh
    gradient is 10% too large. With those entries capped, the differences are
    resolved to round-off: the correct unit passes and the twin fails as a
    mismatch on the inputs behind the tanh (x and w), while the bias weight,
    which does not pass through it, passes."""
    model, layers, notes, ordered = layers_of(name)
    unit = layers["masked_bias/two_sizes"]
    verdicts = {p.input: p.verdict for p in unit.pairs}
    assert all(p.fd_error < 1e-8 for p in unit.pairs), [(p.input, p.fd_error) for p in unit.pairs]
    if wrong:
        assert unit.verdict == "mismatch" and unit.failed
        assert verdicts == {"x": "mismatch", "two_sizes/w": "mismatch", "two_sizes/b": "pass"}
    else:
        assert unit.verdict == "pass" and not unit.failed, verdicts
        assert set(verdicts.values()) == {"pass"}


@pytest.mark.parametrize("name, wrong", [
    ("keras_masked_step.py", False), ("by_layer_own_masking.py", False), ("by_layer_own_masking_wrong.py", True),
])
def test_a_units_keras_mask_is_its_output_so_a_padded_step_is_a_jump_of_the_unit(name, wrong):
    """A masking layer (Keras' Masking, and a user's own whose
    ``compute_mask`` reads its float input) on a batch whose step [0, 2] is
    padding. The layer's floating output there is 0 = x, continuous in x, but
    moving an element unmasks the step: the mask the layer emits flips, and
    the recurrent layer after it reads that step. The unit's outputs include
    that mask, so the pass finds the jump the whole model has (TensorFlow's 0
    is the masked piece's gradient) on exactly the padded step's two elements.
    Before, the unit compared its float output alone, whose derivative there
    is 1 (2 for the doubling layer) against 0: the correct models failed the
    pass as a mismatch. The twin whose custom gradient gives the kept steps
    1.8 where the layer doubles them still fails on every kept element, each
    off by the relative error |1.8 - 2| / 2 = 0.1."""
    model, layers, notes, ordered = layers_of(name)
    unit, after = ordered[0], ordered[1:]
    (pair,) = unit.pairs
    assert sorted(tuple(k.input_index) for k in pair.kinks if k.jump) == [(0, 2, 0), (0, 2, 1)]
    assert all(not r.failed for r in after), [(r.label, r.verdict) for r in after]
    if wrong:
        assert unit.verdict == "mismatch" and unit.failed
        kept = {(b, t, i) for b in range(2) for t in range(3) for i in range(2)} - {(0, 2, 0), (0, 2, 1)}
        assert pair.n_failing == len(kept) == 10
        assert {tuple(e.input_index) for e in pair.failing} <= kept
        assert all(abs(e.rel_error - 0.1) < 1e-6 for e in pair.failing), [e.rel_error for e in pair.failing]
    else:
        assert unit.verdict == "kink" and not unit.failed, [(p.input, p.verdict) for p in unit.pairs]


@pytest.mark.parametrize("name, wrong", [("by_layer_masked_mean.py", False), ("by_layer_masked_mean_wrong.py", True)])
def test_a_unit_is_checked_with_the_mask_keras_hands_its_call(name, wrong):
    """A user's pooling layer averages the steps its ``mask`` keeps, a mask
    ``Layer.__call__`` fills in from its input (Masking, then a Dense that
    passes it on, called in turn by a subclassed model; a Sequential or
    functional model passes it explicitly). The wrong twin's gradient divides
    by every step: right wherever nothing is masked, so the pass, which
    called the layer without its mask, passed it. The unit's call now holds the mask the model handed
    it (the padding placed by construction: step 2 of the first sequence),
    and the twin fails on exactly the kept steps of that sequence, each off by
    the relative error |1/3 - 1/2| / (1/2) = 1/3; the second sequence, with
    nothing masked, and the padded step (masked: 0 both ways) agree."""
    from gradcli.analyses.layers.capture import capture_calls
    from gradcli.model.loading import load_model

    model, layers, notes, ordered = layers_of(name)
    unit = layers["net/masked_mean"]
    (call,) = [c for c in capture_calls(load_model(fixture(name)), None) if c.path == "net/masked_mean"]
    np.testing.assert_array_equal(np.asarray(call.kwargs["mask"]), [[True, True, False], [True, True, True]])
    assert all(not r.failed for r in ordered if r is not unit), [(r.label, r.verdict) for r in ordered]
    if wrong:
        (pair,) = unit.pairs
        assert unit.verdict == "mismatch" and pair.n_failing == 4
        assert sorted(tuple(e.input_index) for e in pair.failing) == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
        assert all(abs(e.rel_error - 1 / 3) < 1e-6 for e in pair.failing), [e.rel_error for e in pair.failing]
    else:
        assert unit.verdict == "pass" and not unit.failed


@pytest.mark.parametrize("name", [
    "by_layer_masked_attention.py", "by_layer_shared_masked_attention.py", "by_layer_masked_mean.py",
    "keras_masked_step.py",
])
def test_each_units_call_rebuilt_from_its_capture_returns_what_the_models_call_returned(name):
    """A unit is checked as the model called it: its call rebuilt from the
    capture (arguments, the mask arguments Keras filled in, the masks its
    inputs carried), run by the local function's own stateless call, returns
    the outputs the model's forward pass recorded. Keras' MultiHeadAttention
    reads the query's mask from the query and deletes it there: rebuilt
    without it, its padded query rows differed; an LSTM or pooling layer
    without its ``mask`` argument computed the padded steps."""
    import tensorflow as tf

    from gradcli.analyses.layers.capture import capture_calls
    from gradcli.analyses.layers.traces import call_parts, signature, with_masks
    from gradcli.model.keras_float64 import stateless
    from gradcli.model.loading import load_model

    calls = capture_calls(load_model(fixture(name)), None)
    assert any(c.input_masks for c in calls)
    if name == "by_layer_shared_masked_attention.py":  # one layer, two paddings: two local functions
        first, second = [c for c in calls if c.path == "net/attend"]
        assert signature(first) != signature(second)  # the masks its arguments carry are in the signature
    for call in calls:
        structure, leaves, _, floating = call_parts(call)
        args, kwargs = tf.nest.pack_sequence_as(structure, with_masks(list(leaves), call.input_masks))
        out, _ = stateless(call.layer, call.policies, call.trainable, call.non_trainable, *args, **kwargs)
        for i in floating:
            np.testing.assert_allclose(np.asarray(tf.nest.flatten(out)[i]), np.asarray(tf.nest.flatten(call.outputs)[i]),
                                       rtol=1e-12, atol=1e-15, err_msg=call.path)


@pytest.mark.parametrize("name, emitted", [
    ("keras_masked_step.py", {"sequential/masking": [(2, 3)], "sequential/lstm": []}),
    ("by_layer_masked_mean.py", {"net/masking": [(2, 3)], "net/dense": [], "net/masked_mean": []}),
    ("by_layer_masked_attention.py", {"net/embed": [(2, 4)], "net/attend": [], "net/head": []}),
])
def test_a_unit_emits_the_masks_it_makes_not_the_ones_it_passes_on(name, emitted):
    """The masks that are outputs of a unit (entries of its c): Masking's and
    an embedding's (``mask_zero``), one per batch row and step; none for a
    Dense or an attention that hands on the mask that came in (the
    attention's output mask is its query's, which it deletes from the query
    during its call), nor for a layer that emits none (an LSTM returning its
    last state, a pooling)."""
    from gradcli.analyses.layers.capture import capture_calls
    from gradcli.model.loading import load_model

    assert {c.path: c.emitted for c in capture_calls(load_model(fixture(name)), None)} == emitted
