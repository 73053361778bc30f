"""gradcli check beside tf.test.compute_gradient (and torch.autograd.gradcheck).

One process, the same MLP loss for every checker, three sizes (about 1k, 10k and
43k parameters). For each size it prints wall times, the ratio of
tf.test.compute_gradient's time to gradcli's, and each checker's largest error
against the exact gradient (float64 GradientTape of the same function, a
reference independent of both finite-difference schemes).

    python bench/check_speed.py            # all sizes
    python bench/check_speed.py --sizes 1k # one size

gradcli's times exclude the TensorFlow import (shared by all) but include
model loading, tracing and the analytic side.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from gradcli.analyses.check import CheckOptions, check_model  # noqa: E402
from gradcli.model.loading import load_model  # noqa: E402

#: layer widths (input, hidden, hidden, output) giving about 1k, 10k and 43k parameters
SIZES = {"1k": (16, 32, 16, 1), "10k": (32, 96, 64, 1), "43k": (64, 256, 104, 1)}
BATCH = 8
PARAMS = ("W1", "b1", "W2", "b2", "W3", "b3")

MODEL_FILE = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    WIDTHS = {widths}

    def model(W1, b1, W2, b2, W3, b3, x, y):
        h = tf.tanh(tf.matmul(x, W1) + b1)
        h = tf.tanh(tf.matmul(h, W2) + b2)
        return tf.reduce_mean((tf.matmul(h, W3) + b3 - y) ** 2)

    def inputs(rng):
        a, b, c, d = WIDTHS
        scale = lambda n: 1 / np.sqrt(n)
        return {{
            "W1": rng.standard_normal((a, b)) * scale(a), "b1": 0.1 * rng.standard_normal(b),
            "W2": rng.standard_normal((b, c)) * scale(b), "b2": 0.1 * rng.standard_normal(c),
            "W3": rng.standard_normal((c, d)) * scale(c), "b3": 0.1 * rng.standard_normal(d),
            "x": rng.standard_normal(({batch}, a)), "y": rng.standard_normal(({batch}, d)),
        }}

    wrt = {params}
    """
)


def write_model(widths, folder) -> str:
    path = os.path.join(folder, f"mlp_{'_'.join(map(str, widths))}.py")
    with open(path, "w") as f:
        f.write(MODEL_FILE.format(widths=widths, batch=BATCH, params=list(PARAMS)))
    return path


def exact_gradient(model) -> np.ndarray:
    point = {n: tf.constant(v) for n, v in model.point.items()}
    with tf.GradientTape() as tape:
        tape.watch([point[n] for n in PARAMS])
        loss = model.function(point)["output"]
    return np.concatenate([g.numpy().ravel() for g in tape.gradient(loss, [point[n] for n in PARAMS])])


def run_gradcli(path, mode):
    started = time.perf_counter()
    model = load_model(path)
    result = check_model(model, CheckOptions(mode=mode))
    seconds = time.perf_counter() - started
    ok = all(p.verdict == "pass" for p in result.pairs)
    error = max(p.max_abs_error for p in result.pairs)
    return seconds, error, ok, result.evaluations


def run_tf_checker(model, dtype):
    """tf.test.compute_gradient as users call it: f of the parameter tensors."""
    fixed = {n: tf.constant(v, dtype) for n, v in model.point.items() if n not in PARAMS}
    params = [tf.constant(model.point[n], dtype) for n in PARAMS]

    def f(*values):
        return model.function({**fixed, **dict(zip(PARAMS, values))})["output"]

    started = time.perf_counter()
    theoretical, numerical = tf.test.compute_gradient(f, params)
    seconds = time.perf_counter() - started
    exact = exact_gradient(model)
    numeric = np.concatenate([np.asarray(j).ravel() for j in numerical])
    analytic = np.concatenate([np.asarray(j).ravel() for j in theoretical])
    # compute_gradient's own verdict is |theoretical - numerical|: its error as a checker.
    return seconds, float(np.max(np.abs(numeric - analytic))), float(np.max(np.abs(numeric - exact)))


def run_torch(model):
    try:
        import torch
    except ImportError:
        return None
    t = {n: torch.tensor(v, dtype=torch.float64, requires_grad=n in PARAMS) for n, v in model.point.items()}

    def f(W1, b1, W2, b2, W3, b3):
        h = torch.tanh(t["x"] @ W1 + b1)
        h = torch.tanh(h @ W2 + b2)
        return ((h @ W3 + b3 - t["y"]) ** 2).mean()

    started = time.perf_counter()
    ok = torch.autograd.gradcheck(f, tuple(t[n] for n in PARAMS), eps=1e-6, atol=1e-5, rtol=1e-3)
    return time.perf_counter() - started, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--skip-tf32", action="store_true", help="skip the float32 TF checker")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="gradcli-bench-")
    print(f"tensorflow {tf.__version__}, MLP loss with a batch of {BATCH}, one process")
    header = f"{'size':>5} {'params':>7} | {'checker':<34} {'seconds':>8} {'ratio':>7} {'max error':>10}"
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        path = write_model(SIZES[size], folder)
        model = load_model(path)
        n = sum(model.point[p].size for p in PARAMS)
        rows = []
        full = run_gradcli(path, "full")
        fast = run_gradcli(path, "fast")
        tf64 = run_tf_checker(model, tf.float64)
        tf32 = None if args.skip_tf32 else run_tf_checker(model, tf.float32)
        rows.append((f"gradcli check --mode full ({full[3]} evals)", full[0], full[1], full[2]))
        rows.append(("gradcli check --mode fast", fast[0], fast[1], fast[2]))
        rows.append(("tf.test.compute_gradient float64", tf64[0], tf64[1], None))
        if tf32:
            rows.append(("tf.test.compute_gradient float32", tf32[0], tf32[1], None))
        torch_result = run_torch(model)
        if torch_result:
            rows.append(("torch.autograd.gradcheck float64", torch_result[0], float("nan"), torch_result[1]))
        for label, seconds, error, ok in rows:
            ratio = tf64[0] / seconds
            verdict = "" if ok is None else ("  pass" if ok else "  FAIL")
            print(f"{size:>5} {n:>7} | {label:<34} {seconds:8.3f} {ratio:6.1f}x {error:10.2e}{verdict}")
        sys.stdout.flush()
    print("ratio = tf.test.compute_gradient (float64) time / this checker's time;")
    print("max error: gradcli's largest |analytic - numeric| (float64); compute_gradient's |theoretical - numerical|.")


if __name__ == "__main__":
    main()
