"""TensorFlow Probability's own bijectors through ``logdet``, ``jacobian``,
``vjp``, ``jvp``, ``hessian`` and ``check`` (issue 35).

A TFP bijector caches ``forward(x)`` by the input tensor object: a command
that differentiates a call on tensors an earlier call saw gets the cached
output, with no path to the watched input (``numerics.autodiff.fresh``). A
bijector with a constant Jacobian returns its log-det as one scalar for the
whole batch (``analyses.logdet``). The model files are
``tests/models/tfp_*.py`` (one factory, ``_tfp_flows.py``).

Independent truth: closed forms (sigmoid, softplus, the chain, the
triangular scale), else the Jacobian by central differences of the
bijector's ``forward`` in float64, computed here, and its ``slogdet``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

tfp = pytest.importorskip("tensorflow_probability")

import gradcli  # noqa: E402
from conftest import FIXTURES, fixture, gradcli as run_cli  # noqa: E402
from conftest import central_jacobians as conftest_central_jacobians  # noqa: E402
from gradcli.numerics import autodiff  # noqa: E402
from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()
sys.path.insert(0, str(FIXTURES))
import _tfp_flows as flows  # noqa: E402

X = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5], [-0.8, 0.9, 0.2], [0.6, -0.3, 1.4]])
X4 = np.array([[0.3, -1.2, 0.7, 0.1], [1.1, 0.4, -0.5, -0.9], [-0.8, 0.9, 0.2, 1.3], [0.6, -0.3, 1.4, -0.2]])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


#: log|det dy/dx| per example, by hand.
CLOSED_FORMS = {
    "sigmoid": lambda x: np.sum(np.log(sigmoid(x) * (1 - sigmoid(x))), axis=-1),
    "softplus": lambda x: np.sum(np.log(sigmoid(x)), axis=-1),  # d softplus = sigmoid
    # y = sigmoid(2x) + 0.3: dy/dx = 2 s(2x) (1 - s(2x))
    "chain": lambda x: np.sum(np.log(2 * sigmoid(2 * x) * (1 - sigmoid(2 * x))), axis=-1),
    # y = L x, L lower triangular: log|det L| = sum log|diag L|, for every example
    "scale_tril": lambda x: np.full(len(x), np.sum(np.log(np.abs(np.diag(flows.SCALE_TRIL))))),
}


def point_of(name):
    return X4 if flows.SHAPES.get(name, (4, 3))[1] == 4 else X


def central_jacobians(name, x, h=1e-6):
    """Per example, dy/dx by central differences of the bijector's forward in
    float64 (``[batch, n, n]``): truncation h^2 ~ 1e-12, round-off eps/h ~ 1e-10."""
    b = flows.bijector(name)
    return conftest_central_jacobians(lambda a: b.forward(tf.constant(a)).numpy(), x, h)  # a new tensor each point


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_logdet_of_a_real_bijector_is_its_closed_form(name):
    result = gradcli.logdet(fixture(f"tfp_{name}.py"), set={"x": X})
    truth = CLOSED_FORMS[name](X)
    assert result.n_failing == 0, result
    assert [e.index for e in result.examples] == list(range(len(X)))
    np.testing.assert_allclose([e.logabsdet for e in result.examples], truth, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose([e.declared for e in result.examples], truth, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["realnvp", "maf", "chain"])
def test_logdet_of_a_flow_is_slogdet_of_its_central_differences(name):
    x = point_of(name)
    result = gradcli.logdet(fixture(f"tfp_{name}.py"), set={"x": x})
    sign, truth = np.linalg.slogdet(central_jacobians(name, x))
    assert result.n_failing == 0, result
    np.testing.assert_allclose([e.logabsdet for e in result.examples], truth, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose([e.sign for e in result.examples], sign)


@pytest.mark.parametrize("mode", ["auto", "reverse", "forward"])
@pytest.mark.parametrize("name", ["realnvp", "chain"])
def test_jacobian_of_a_bijector_is_its_central_differences_in_every_mode(name, mode):
    x = point_of(name)
    result = gradcli.jacobian(fixture(f"tfp_{name}.py"), mode=mode, set={"x": x})
    block = result.arrays()["output/x"]  # [batch, n, batch, n]
    per_example = central_jacobians(name, x)
    truth = np.zeros(block.shape)
    for b in range(len(x)):
        truth[b, :, b, :] = per_example[b]
    np.testing.assert_allclose(block, truth, rtol=1e-7, atol=1e-8)


def test_a_wrong_log_det_of_a_custom_bijector_fails_with_exit_1():
    """Declared 2 log cosh(x) per element, the Jacobian's log|det| log cosh(x)."""
    run = run_cli("logdet", fixture("tfp_wrong_log_det.py"), "--json")
    assert run.exit_code == 1, run
    result = run.result
    assert result["n_failing"] == 4, run
    rng = np.random.default_rng(0)  # the file's inputs(rng) at the default seed
    x = rng.standard_normal((4, 3))
    truth = np.sum(np.log(np.cosh(x)), axis=-1)
    examples = sorted(result["examples"], key=lambda e: e["index"])
    np.testing.assert_allclose([e["logabsdet"] for e in examples], truth, rtol=1e-12)
    np.testing.assert_allclose([e["declared"] for e in examples], 2 * truth, rtol=1e-12)


def test_a_constant_log_det_broadcasts_over_the_batch_on_the_command_line():
    run = run_cli("logdet", fixture("tfp_scale_tril.py"))
    assert run.exit_code == 0, run
    assert "agrees with slogdet of the Jacobian at all 4 examples" in run.stdout, run


def test_every_command_differentiates_the_bijectors_own_call():
    """Sigmoid, y = s(x): vjp c s(1-s), jvp t s(1-s), the Hessian of
    sum(y) diag(s(1-s)(1-2s)), and check in both modes."""
    path = fixture("tfp_sigmoid.py")
    x = X
    d = sigmoid(x) * (1 - sigmoid(x))
    c = np.linspace(-1.0, 2.0, x.size).reshape(x.shape)
    found = gradcli.vjp(path, cotangents={"output": c}, set={"x": x}).arrays()["x"]
    np.testing.assert_allclose(found, c * d, rtol=1e-12)
    found = gradcli.jvp(path, tangents={"x": c}, set={"x": x}).arrays()["output"]
    np.testing.assert_allclose(found, c * d, rtol=1e-12)
    hessian = gradcli.hessian(path, set={"x": x}, cotangents={"output": np.ones_like(x)}).hessian
    np.testing.assert_allclose(hessian, np.diag((d * (1 - 2 * sigmoid(x))).reshape(-1)), rtol=1e-9, atol=1e-12)
    for modes in ("both", "reverse"):
        result = gradcli.check(path, autodiff=modes, set={"x": x})
        (pair,) = result.models[0].pairs
        assert result.ok and pair.verdict == "pass", (modes, pair)


def test_a_warm_check_of_a_bijector_takes_its_kept_program_and_passes(monkeypatch):
    """The second check of one callable runs its kept program
    (``autodiff.Program``): the bijector's call inside that trace gets fresh
    tensors too. The gradient of sum(c * s(x)) is c s(1-s)."""
    used = []
    original = autodiff.Program.jacobians
    monkeypatch.setattr(autodiff.Program, "jacobians", lambda self, p: used.append(1) or original(self, p))
    b = flows.bijector("softplus")

    def flow(x):
        return b.forward(x)

    for _ in range(3):
        result = gradcli.check(flow, (X[0],))
        (pair,) = result.models[0].pairs
        assert result.ok and pair.verdict == "pass", pair
    assert used, "no warm check took its program"
    found = gradcli.vjp(flow, (X[0],), {"output": [1.0, 2.0, 3.0]}).arrays()["x"]
    np.testing.assert_allclose(found, np.array([1.0, 2.0, 3.0]) * sigmoid(X[0]), rtol=1e-12)


# -- a bijector is a model (gradcli.model.bijector) -----------------------------


def test_logdet_of_a_bijector_checks_both_directions_and_their_identities():
    """Sigmoid: forward log-det sum log s(1-s) at x, inverse log-det
    -sum log(y(1-y)) at y = s(x), inverse(forward(x)) = x."""
    result = gradcli.logdet(fixture("tfp_bijector_sigmoid.py"), set={"x": X})
    assert result.ok, result
    truth = CLOSED_FORMS["sigmoid"](X)
    np.testing.assert_allclose([e.logabsdet for e in result.examples], truth, rtol=1e-12)
    y = sigmoid(X)
    inverse_truth = -np.sum(np.log(y * (1 - y)), axis=-1)
    assert (result.inverse.input, result.inverse.output) == ("y", "inverse")
    np.testing.assert_allclose([e.logabsdet for e in result.inverse.examples], inverse_truth, rtol=1e-10)
    np.testing.assert_allclose([e.declared for e in result.inverse.examples], inverse_truth, rtol=1e-10)
    assert [c.n_failing for c in result.consistency] == [0, 0], result.consistency


@pytest.mark.parametrize("name, failing", [
    ("wrong_inverse", {"forward": 0, "inverse": 0, "negatives": 0, "round trip": 4}),
    ("wrong_inverse_log_det", {"forward": 0, "inverse": 4, "negatives": 4, "round trip": 0}),
])
def test_a_wrong_bijector_fails_logdet_with_exit_1_where_it_is_wrong(name, failing):
    run = run_cli("logdet", fixture(f"tfp_bijector_{name}.py"), "--json")
    assert run.exit_code == 1, run
    result = run.result
    found = {"forward": result["n_failing"], "inverse": result["inverse"]["n_failing"],
             "negatives": result["consistency"][0]["n_failing"], "round trip": result["consistency"][1]["n_failing"]}
    assert found == failing, run
    x = np.random.default_rng(0).standard_normal((4, 3))  # the file's inputs(rng) at the default seed
    if name == "wrong_inverse":  # inverse(forward(x)) = x + 1: off by exactly 1
        assert result["consistency"][1]["worst_error"] == pytest.approx(1.0, rel=1e-12)
    else:  # declared +log cosh(x) against the truth -log cosh(x) at y = sinh(x)
        examples = sorted(result["inverse"]["examples"], key=lambda e: e["index"])
        truth = -np.sum(np.log(np.cosh(x)), axis=-1)
        np.testing.assert_allclose([e["logabsdet"] for e in examples], truth, rtol=1e-10)
        np.testing.assert_allclose([e["declared"] for e in examples], -truth, rtol=1e-10)


def test_check_of_a_bijector_checks_both_directions_gradients():
    """forward by x and inverse by y pass; the pairs across are disconnected.
    The inverse's gradient is the closed form 1 / (y (1 - y))."""
    path = fixture("tfp_bijector_sigmoid.py")
    result = gradcli.check(path, set={"x": X})
    verdicts = {(p.input, p.output): p.verdict for p in result.models[0].pairs}
    assert result.ok, verdicts
    for pair in [("x", "forward"), ("x", "forward_log_det_jacobian"), ("y", "inverse"), ("y", "inverse_log_det_jacobian")]:
        assert verdicts[pair] == "pass", verdicts
    assert verdicts[("x", "inverse")] == verdicts[("y", "forward")] == "disconnected", verdicts
    y = np.full_like(X, 0.25)
    found = gradcli.vjp(path, cotangents={"inverse": np.ones_like(X)}, set={"x": X, "y": y}).arrays()["y"]
    np.testing.assert_allclose(found, 1 / (y * (1 - y)), rtol=1e-12)


# -- a tfp.math special function, against mpmath --------------------------------------------------

A, B = np.array([0.7, 1.5, 3.0, 4.2]), np.array([2.0, 0.4, 1.1, 5.0])


def _digamma_truth(a, b):
    """d lbeta(a, b) / da = psi(a) - psi(a + b), in 30 digits (mpmath), as float64."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    return np.array([float(mpmath.digamma(x) - mpmath.digamma(x + y)) for x, y in zip(a, b)])


def test_tfp_lbeta_gradient_is_the_digamma_difference_and_passes():
    """tfp.math.lbeta: gradcli's Jacobian is psi(a) - psi(a + b) (mpmath), and the check passes."""
    jacobian = gradcli.jacobian(lambda a, b: tfp.math.lbeta(a, b), (A, B)).arrays()["output/a"]
    np.testing.assert_allclose(np.diag(jacobian), _digamma_truth(A, B), rtol=1e-12)
    assert gradcli.check(lambda a, b: tfp.math.lbeta(a, b), (A, B)).ok


def test_a_wrong_custom_gradient_of_lbeta_fails_at_every_element():
    """The same lbeta with its a-gradient psi(a) - psi(b) (a real slip: b for a + b)."""

    @tf.custom_gradient
    def lbeta(a, b):
        def grad(dy):
            return dy * (tf.math.digamma(a) - tf.math.digamma(b)), dy * (tf.math.digamma(b) - tf.math.digamma(a + b))
        return tfp.math.lbeta(a, b), grad

    result = gradcli.check(lambda a, b: lbeta(a, b), (A, B))
    pair = {p.input: p for p in result.models[0].pairs}["a"]
    assert not result.ok and pair.verdict == "mismatch", pair
    assert pair.n_failing == len(A)
    truth = _digamma_truth(A, B)
    for element in pair.failing:
        i = element.input_index[0]
        assert element.numeric == pytest.approx(truth[i], rel=1e-7)


def test_a_bijector_whose_log_dets_need_a_matrix_event_is_taken_at_its_own_event_rank():
    """CholeskyOuterProduct's log-dets exist from event rank 2, CorrelationCholesky's
    inverse one too (TFP raises at 1, and every command stopped with exit 3):
    each log-det is taken at the bijector's own least event rank where it is
    above 1, and the note says which. The forward log-det is the closed form
    n log 2 + sum_i (n - i + 1) log L_ii per 2 x 2 factor L; CorrelationCholesky's
    gradients pass in both directions."""
    from gradcli.model.loading import load_model

    model = load_model(fixture("tfp_bijector_cholesky_outer.py"))
    L = flows.POINTS["cholesky_outer"]
    n = L.shape[-1]
    truth = n * np.log(2) + sum((n - i) * np.log(L[:, i, i]) for i in range(n))
    np.testing.assert_allclose(np.asarray(model.outputs["forward_log_det_jacobian"]), truth, rtol=1e-12)
    assert any("(log-dets with event_ndims=2)" in n for n in model.notes), model.notes

    result = gradcli.check(fixture("tfp_bijector_correlation_cholesky.py"))
    (checked,) = result.models
    assert result.ok, [(p.input, p.output, p.verdict) for p in checked.pairs]
    assert any("(log-dets with event_ndims=1 forward, 2 inverse)" in n for n in checked.notes), checked.notes
    verdicts = {(p.input, p.output): p.verdict for p in checked.pairs}
    assert verdicts[("y", "inverse_log_det_jacobian")] == verdicts[("x", "forward_log_det_jacobian")] == "pass", verdicts


def test_cholesky_outer_products_inverse_is_checked_along_symmetric_directions():
    """CholeskyOuterProduct's inverse is TensorFlow's Cholesky of y = L L^T,
    whose gradient is the symmetric one: element by element its pairs from y
    failed, with TensorFlow's Cholesky named the culprit. Along y's symmetric
    directions (3 per 2 x 2 matrix, 2 matrices) they pass, and say so. Truth at the
    point: the inverse is L itself (y was made from it)."""
    result = gradcli.check(fixture("tfp_bijector_cholesky_outer.py"))
    (checked,) = result.models
    assert result.ok, [(p.input, p.output, p.verdict) for p in checked.pairs]
    pairs = {(p.input, p.output): p for p in checked.pairs}
    for output in ("inverse", "inverse_log_det_jacobian"):
        (warning,) = [w for w in pairs[("y", output)].warnings if "read as symmetric" in w]
        assert "Cholesky (tf.linalg.cholesky)" in warning and "the 6 directions of y" in warning, warning
    from gradcli.model.loading import load_model

    model = load_model(fixture("tfp_bijector_cholesky_outer.py"))
    np.testing.assert_allclose(np.asarray(model.outputs["inverse"]), flows.POINTS["cholesky_outer"], rtol=1e-12)


def test_covariance_log_densities_are_checked_along_symmetric_directions():
    """A multivariate normal's log-density with its covariance as the input,
    and a Wishart's at a sample: each takes TensorFlow's Cholesky of a
    symmetric matrix, and element by element each failed with the Cholesky
    named the culprit. Along the 6 symmetric directions they pass, and say so.
    Truth at the point: scipy's log-densities."""
    from scipy import stats

    from gradcli.model.loading import load_model

    path = fixture("tfp_covariance_log_densities.py")
    model = load_model(path)
    cov, x = (np.asarray(model.point[n]) for n in ("cov", "x"))
    data = np.random.default_rng(11).standard_normal((4, 3))
    assert float(model.outputs["normal"]) == pytest.approx(
        stats.multivariate_normal(np.zeros(3), cov).logpdf(data).sum(), rel=1e-10)
    assert float(model.outputs["wishart"]) == pytest.approx(stats.wishart(df=5, scale=np.eye(3)).logpdf(x), rel=1e-10)
    result = gradcli.check(path)
    (checked,) = result.models
    assert result.ok, [(p.input, p.output, p.verdict) for p in checked.pairs]
    pairs = {(p.input, p.output): p for p in checked.pairs}
    for key in [("cov", "normal"), ("x", "wishart")]:
        assert any(f"compared along the 6 directions of {key[0]}" in w for w in pairs[key].warnings), pairs[key].warnings


def test_a_bijector_that_takes_no_float64_is_checked_in_its_own_float32():
    """TFP keeps ScaleMatvecLU in float32 (it refuses a float64 x, and every
    command stopped with exit 3): x is taken in float32, the check tries
    float64 and says why it runs in float32, and passes at float32 rules. Its
    outputs at the point are the closed forms y = L U x and log |det| =
    sum_i log |U_ii| (L the unit lower triangle of LU, U its upper one)."""
    from gradcli.model.loading import load_model

    path = fixture("tfp_bijector_scale_matvec_lu.py")
    model = load_model(path)
    lu = flows.LOWER_UPPER
    scale = (np.tril(lu, -1) + np.eye(3)) @ np.triu(lu)
    x = np.asarray(model.point["x"], np.float64)
    assert model.point["x"].dtype == np.float32
    np.testing.assert_allclose(model.outputs["forward"], x @ scale.T, rtol=1e-5)
    np.testing.assert_allclose(model.outputs["forward_log_det_jacobian"], np.sum(np.log(np.abs(np.diag(lu)))), rtol=1e-5)
    result = gradcli.check(path)
    (checked,) = result.models
    assert result.ok, [(p.input, p.output, p.verdict) for p in checked.pairs]
    assert checked.dtype == "float32"
    assert any(n.startswith("the model does not run in float64") for n in checked.notes), checked.notes


def test_a_covariance_posterior_with_a_trace_penalty_is_compared_element_by_element():
    """A MAP objective: a multivariate normal's log-likelihood, a Wishart
    log-prior and a trace penalty of one covariance S. S reaches two
    Choleskys and the output around them, so no direction is excused: every
    element is compared with each Cholesky's part as it reads its matrix.
    Truth: scipy's log-densities at the point; and TensorFlow's gradient plus
    the rule's correction is the central differences of the same objective
    in scipy, with each density given the matrix its Cholesky reads (the
    lower triangle, mirrored) and the trace all of S."""
    import tensorflow as tf
    from scipy import stats

    from gradcli.model.loading import load_model
    from gradcli.verdicts.culprit import ModelGraph
    from gradcli.verdicts.symmetric import lower_triangle_correction, path_ends, readers_on_paths
    from tests.models.tfp_covariance_posterior import DATA, PENALTY

    path = fixture("tfp_covariance_posterior.py")
    model = load_model(path)
    S = np.asarray(model.point["S"])

    def objective(B):
        read = np.tril(B) + np.tril(B, -1).T
        return (stats.multivariate_normal(np.zeros(3), read).logpdf(DATA).sum()
                + stats.wishart(df=5, scale=np.eye(3)).logpdf(read) - PENALTY * np.trace(B))

    assert float(model.outputs["output"]) == pytest.approx(objective(S), rel=1e-10)
    result = gradcli.check(path)
    ((pair,),) = [m.pairs for m in result.models]
    assert result.ok and pair.verdict == "pass" and pair.compared == 9, (pair.verdict, pair.warnings)
    (warning,) = [w for w in pair.warnings if "symmetric" in w]
    assert warning.count("Cholesky (tf.linalg.cholesky)") == 2 and "by another path too" in warning, warning

    graph = ModelGraph(model)
    readers, around = readers_on_paths(graph, "S", path_ends(graph, ["output"]))
    assert len(readers) == 2 and around
    correction = lower_triangle_correction(graph, "S", graph.outputs["output"], readers, 1).reshape(3, 3)
    x = tf.constant(S)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model.function({"S": x})["output"]
    central = np.zeros((3, 3))
    for index in np.ndindex(3, 3):
        E = np.zeros((3, 3))
        E[index] = 1e-6
        central[index] = (objective(S + E) - objective(S - E)) / 2e-6
    np.testing.assert_allclose(tape.gradient(y, x).numpy() + correction, central, rtol=1e-6, atol=1e-7)
    # second derivatives (a Laplace approximation's Hessian): TensorFlow
    # Probability computes both densities from the Cholesky factors, and the
    # trace's gradient is constant, so the gradient reaches S only through the
    # Choleskys: compared along the 6 symmetric directions (54 of 81 failed)
    second = gradcli.check(path, order=2)
    assert second.ok, [(p.input, p.output, p.verdict) for m in second.models for p in m.pairs]
    (pair,) = [p for m in second.models for p in m.pairs if p.output == "d(output)/dS"]
    assert pair.compared == 9 * 6 and any("compared along the 6 directions of S" in w for w in pair.warnings)
