"""Issue 35, item 11: samplers that draw other values when differentiated
(``verdicts.differentiated_values``) and paths cut inside a library or a
helper module (``verdicts.library_cuts``).

Independent truth: the draws themselves, taken here with and without a tape
(TFP's Gamma sampler; ``tf.random.stateless_uniform`` for the hand-written
draw), the closed form d(y_i - y_{i-1})/dy_j = +1 (j = i), -1 (j = i - 1), and
source lines read from the files that make the cut.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

tfp = pytest.importorskip("tensorflow_probability")

from conftest import check_json, fixture, line_of, pairs  # noqa: E402
from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

SENTENCE = "the model returns other values when differentiated (under a GradientTape: "
NOT_DERIVATIVE = "its gradient is not the derivative of the values finite differences see"


def only_pair(path):
    run, document = check_json(path)
    assert run.exit_code == 1, run
    (pair,) = pairs(document).values()
    return pair


def test_tfp_gamma_draws_other_values_under_a_tape():
    pair = only_pair(fixture("tfp_gamma_sample.py"))
    assert pair["verdict"] == "mismatch" and pair["failed"]
    assert SENTENCE in pair["explanation"] and NOT_DERIVATIVE in pair["explanation"]
    alpha = tf.constant([0.7, 1.5, 3.0], tf.float64)
    gamma = tfp.distributions.Gamma

    plain = gamma(concentration=alpha, rate=1.0).sample(seed=(1, 2)).numpy()
    with tf.GradientTape() as tape:
        tape.watch(alpha)
        taped = gamma(concentration=alpha, rate=1.0).sample(seed=(1, 2)).numpy()
    shift = pair["value_shift"]
    (i,) = shift["index"]
    assert shift["way"] == "under a GradientTape"
    np.testing.assert_allclose(shift["plain"], plain[i], rtol=1e-6)
    np.testing.assert_allclose(shift["differentiated"], taped[i], rtol=1e-6)
    np.testing.assert_allclose(shift["difference"], np.max(np.abs(taped - plain)), rtol=1e-6)
    assert shift["difference"] > 100 * shift["allowed"]


def test_hand_written_draw_that_changes_under_a_tape():
    """-log(u) scale with u drawn from another seed when a gradient is
    recorded: analytic -log(u_taped), numeric -log(u_plain), on the diagonal."""
    pair = only_pair(fixture("draw_when_differentiated.py"))
    assert pair["verdict"] == "mismatch" and pair["failed"]
    assert SENTENCE in pair["explanation"] and NOT_DERIVATIVE in pair["explanation"]
    scale = np.array([0.5, 1.0, 2.0])

    def u(seed):
        return tf.random.stateless_uniform((3,), seed=seed, dtype=tf.float64).numpy()

    u_plain, u_taped = u((1, 2)), u((3, 4))
    for element in pair["failing"]:
        (i,), (j,) = element["output_index"], element["input_index"]
        assert i == j
        np.testing.assert_allclose(element["analytic"], -np.log(u_taped[i]), rtol=1e-9)
        np.testing.assert_allclose(element["numeric"], -np.log(u_plain[i]), rtol=1e-6)
    shift = pair["value_shift"]
    (i,) = shift["index"]
    np.testing.assert_allclose(shift["plain"], -np.log(u_plain[i]) * scale[i], rtol=1e-12)
    np.testing.assert_allclose(shift["differentiated"], -np.log(u_taped[i]) * scale[i], rtol=1e-12)
    assert i == int(np.argmax(np.abs(np.log(u_taped) - np.log(u_plain)) * scale))


def test_same_draw_with_a_wrong_gradient_gets_no_excuse():
    """One draw both ways and a gradient off by 1: the values do not differ,
    so the mismatch is explained by nothing."""
    pair = only_pair(fixture("draw_same_wrong_gradient.py"))
    assert pair["verdict"] == "mismatch" and pair["failed"]
    assert "other values" not in pair["explanation"] and pair["value_shift"] is None
    u = tf.random.stateless_uniform((3,), seed=(1, 2), dtype=tf.float64).numpy()
    assert pair["n_failing"] == 3
    for element in pair["failing"]:
        (i,) = element["output_index"]
        np.testing.assert_allclose(element["analytic"], -np.log(u[i]) + 1.0, rtol=1e-9)
        np.testing.assert_allclose(element["numeric"], -np.log(u[i]), rtol=1e-6)


def assert_lost_subdiagonal(pair):
    """The failing elements are exactly d out_i / d y_{i-1} (closed form -1),
    where the analytic value is 0."""
    assert pair["verdict"] == "mismatch" and pair["failed"]
    got = {(e["output_index"][0], e["input_index"][0]): (e["analytic"], e["numeric"]) for e in pair["failing"]}
    assert set(got) == {(1, 0), (2, 1), (3, 2)}
    for analytic, numeric in got.values():
        assert analytic == 0.0
        np.testing.assert_allclose(numeric, -1.0, rtol=1e-6)


def test_tfp_cumsum_inverse_names_where_the_path_leaves_tensorflow():
    pair = only_pair(fixture("tfp_cumsum_inverse.py"))
    assert_lost_subdiagonal(pair)
    (site,) = [s for s in pair["sites"] if s["op_type"] == "numpy"]
    from tensorflow_probability.python.bijectors import cumsum
    from tensorflow_probability.python.internal import prefer_static

    where, called, user = site["location"].split(", ")
    assert where.startswith("tensorflow_probability/python/internal/prefer_static.py:")
    line = int(where.rsplit(":", 1)[1])
    assert "get_static_value" in inspect.getsource(prefer_static).splitlines()[line - 1]
    assert called.startswith("called from tensorflow_probability/python/bijectors/cumsum.py:")
    source, first = inspect.getsourcelines(cumsum.Cumsum._inverse)
    assert first <= int(called.rsplit(":", 1)[1]) < first + len(source)  # inside Cumsum._inverse
    assert user.endswith(f"tfp_cumsum_inverse.py:{line_of(fixture('tfp_cumsum_inverse.py'), 'Cumsum().inverse')}")
    assert "the path is cut by a conversion to numpy" in pair["explanation"]
    assert site["location"] in pair["explanation"]


def test_cut_through_numpy_in_a_helper_module():
    pair = only_pair(fixture("cut_in_helper.py"))
    assert_lost_subdiagonal(pair)
    (site,) = pair["sites"]
    helper = line_of(fixture("_cut_helpers.py"), "known = tf.get_static_value(y)")
    caller = line_of(fixture("cut_in_helper.py"), "return differences(y)")
    where, called = site["location"].split(", ")
    assert where.endswith(f"_cut_helpers.py:{helper}")
    assert called.startswith("called from ") and called.endswith(f"cut_in_helper.py:{caller}")
    assert "(known = tf.get_static_value(y))" in site["description"]


def test_stop_gradient_made_in_a_helper_module():
    pair = only_pair(fixture("cut_in_helper_op.py"))
    assert_lost_subdiagonal(pair)
    (site,) = [s for s in pair["sites"] if s["op_type"] == "StopGradient"]
    made = line_of(fixture("_cut_helpers.py"), "return tf.stop_gradient(")
    assert f"_cut_helpers.py:{made})" in site["description"]
    assert site["location"].endswith(f"cut_in_helper_op.py:{line_of(fixture('cut_in_helper_op.py'), 'held_shift(y)')}")
    assert "the path is cut by tf.stop_gradient (made at " in pair["explanation"]
