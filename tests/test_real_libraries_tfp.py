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
    forward = lambda a: b.forward(tf.constant(a)).numpy()  # noqa: E731 - a new tensor each point
    batch, n = x.shape
    jacobians = np.zeros((batch, n, n))
    for j in range(n):
        step = np.zeros_like(x)
        step[:, j] = h
        jacobians[:, :, j] = (forward(x + step) - forward(x - step)) / (2 * h)
    return jacobians


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
