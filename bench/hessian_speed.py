"""Extreme Hessian eigenvalues of a 200,000-parameter model by Lanczos, against truth.

Model: f(W) = 1/2 tr(W^T A W B) with W of shape 400 x 500 (200,000 parameters),
A (400 x 400) symmetric indefinite and B (500 x 500) symmetric positive definite,
both random. Its Hessian is B (x) A (Kronecker product), whose eigenvalues are
the products a_i b_j: the largest and smallest are computed independently from
eigvalsh(A) and eigvalsh(B) (two small dense problems), never from the Hessian.

Prints the time of one gradient and of one Hessian-vector product each way, of
the Lanczos run (smallest and largest eigenvalue, --tol 1e-6: a residual r
guarantees an eigenvalue within r of the Ritz value, and here both extremes
have |lambda| ~ max|lambda|, so residual <= 1e-6 max|lambda| guarantees 1e-6
relative accuracy), their ratio, the number of Hessian-vector
products, and the relative errors of both eigenvalues (target: <= 1e-6 in under
10 s). Run: python bench/hessian_speed.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from gradcli.analyses.hessian import lanczos_spectrum  # noqa: E402
from gradcli.model.loading import Model  # noqa: E402
from gradcli.analyses.objective import Objective  # noqa: E402

ROWS, COLS = 400, 500


def problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((ROWS, ROWS))
    A = (G + G.T) / np.sqrt(8 * ROWS)  # spectrum roughly [-1, 1]
    X = rng.standard_normal((COLS, 2 * COLS))
    B = X @ X.T / (2 * COLS) + 0.1 * np.eye(COLS)  # SPD, spectrum roughly [0.19, 3]
    W = rng.standard_normal((ROWS, COLS))
    a, b = np.linalg.eigvalsh(A), np.linalg.eigvalsh(B)
    products = np.outer(a, b)
    return A, B, W, float(products.min()), float(products.max())


def main() -> None:
    A, B, W, true_min, true_max = problem()
    At, Bt = tf.constant(A), tf.constant(B)

    def function(values):
        W = values["W"]
        return {"loss": 0.5 * tf.reduce_sum(W * tf.matmul(tf.matmul(At, W), Bt))}

    model = Model(name="kronecker quadratic", path=__file__, function=function,
                  point={"W": W}, wrt=["W"], native_dtypes={})
    objective = Objective(model, {"loss": np.ones(())})
    theta = objective.theta0
    objective.gradient(theta)
    objective.hvp(theta, theta)  # trace both functions once, outside the timings
    runs = 5
    started = time.perf_counter()
    for _ in range(runs):
        objective.gradient(theta)
    gradient_time = (time.perf_counter() - started) / runs
    for mode in ("forward", "reverse"):
        objective.hvp(theta, theta, mode)
        started = time.perf_counter()
        for _ in range(runs):
            objective.hvp(theta, theta, mode)
        print(f"one HVP ({mode}-over-reverse): {(time.perf_counter() - started) / runs * 1e3:.1f} ms")
    started = time.perf_counter()
    spectrum, _ = lanczos_spectrum(objective, theta, 1, 1e-6, np.random.default_rng(0))
    lanczos_time = time.perf_counter() - started
    err_min = abs(spectrum.smallest - true_min) / abs(true_min)
    err_max = abs(spectrum.largest - true_max) / abs(true_max)
    print(f"parameters: {objective.n}")
    print(f"one gradient: {gradient_time * 1e3:.1f} ms")
    print(f"lanczos (smallest and largest): {lanczos_time:.2f} s, {spectrum.hvps} HVPs, "
          f"{spectrum.iterations} restarts, {lanczos_time / gradient_time:.0f} gradients' time")
    print(f"smallest {spectrum.smallest:.12g} (true {true_min:.12g}, rel err {err_min:.2e}, residual {spectrum.residuals[0]:.2e})")
    print(f"largest  {spectrum.largest:.12g} (true {true_max:.12g}, rel err {err_max:.2e}, residual {spectrum.residuals[-1]:.2e})")
    ok = err_min <= 1e-6 and err_max <= 1e-6 and lanczos_time < 10
    print(f"target (both to 1e-6 relative in under 10 s): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
