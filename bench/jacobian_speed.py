"""Jacobian of a 500 -> 500 map: gradcli's vectorised Jacobian vs a Python loop of tape.gradient.

The map is y = tanh(W x) with W a fixed random 500 x 500 matrix, in float64;
its Jacobian has the closed form diag(1 - y^2) W, which both results are
compared with. Peers run side by side in one process, each timed once (one
run, after one warm-up call of each so TensorFlow's start-up costs are not
counted), and the ratio is printed.

    python bench/jacobian_speed.py [--n 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from gradcli.numerics import autodiff  # noqa: E402


def make_map(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = tf.constant(rng.standard_normal((n, n)) / np.sqrt(n))
    x = rng.standard_normal(n)

    def function(values):
        return {"y": tf.tanh(tf.linalg.matvec(w, values["x"]))}

    return function, {"x": x}, w.numpy()


def gradcli_jacobian(function, point):
    """What `gradcli jacobian` computes: vectorised (pfor) reverse or forward mode."""
    result = autodiff.jacobians(function, point, ["x"], ["y"])
    return result.blocks[("y", "x")], f"{result.mode} mode, {result.passes} vectorised passes"


def loop_of_gradients(function, point):
    """The usual hand-written alternative: one tape.gradient call per output element."""
    x = tf.constant(point["x"])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = function({"x": x})["y"]
        rows = [y[i] for i in range(y.shape[0])]  # slicing inside the tape keeps them differentiable
    jac = np.stack([tape.gradient(r, x).numpy() for r in rows])
    return jac, f"{len(rows)} tape.gradient calls"


def timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    function, point, w = make_map(args.n)
    y = np.tanh(w @ point["x"])
    truth = (1.0 - y**2)[:, None] * w
    small_function, small_point, _ = make_map(8, seed=1)  # warm-up: imports, first kernels
    gradcli_jacobian(small_function, small_point)
    loop_of_gradients(small_function, small_point)

    rows = []
    for name, fn in (("gradcli jacobian (pfor)", gradcli_jacobian), ("loop of tape.gradient", loop_of_gradients)):
        seconds, (jac, how) = timed(fn, function, point)
        error = float(np.max(np.abs(np.asarray(jac) - truth)))
        rows.append((name, seconds, how, error))
    print(f"Jacobian of y = tanh(W x), {args.n} -> {args.n}, float64, one timed run each")
    for name, seconds, how, error in rows:
        print(f"  {name:26s} {seconds:8.3f} s   {how}; max |J - closed form| = {error:.2e}")
    print(f"  ratio (loop / gradcli): {rows[1][1] / rows[0][1]:.1f}x")


if __name__ == "__main__":
    main()
