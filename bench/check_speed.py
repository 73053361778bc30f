"""gradcli check beside every peer checker, on the same function, in one process.

The function is an MLP loss (16-n-4 tanh layers, batch 8, mean squared error)
at about 1k, 10k and 43k parameters. Each checker runs after the imports
(shared, not timed) on the same float64 point:

* gradcli ``check_model`` in full and fast mode (model loading, tracing and the
  analytic side included), and auto on a 6,000-parameter model (which mode it
  picked, and its prediction);
* ``tf.test.compute_gradient`` (float64), verdict by ``assertAllClose``'s
  default tolerances (rtol = atol = 1e-6), as a TensorFlow test would use it;
* ``torch.autograd.gradcheck`` (float64, default eps/atol/rtol) slow and with
  ``fast_mode=True``;
* ``jax.test_util.check_grads`` (float64, order 1, reverse mode, defaults).

A peer that is not installed is skipped with a note (``pip install
'gradcli[bench]'`` installs them on CPU). Printed per checker: wall seconds
(median of ``--repeat`` runs), the largest error of its numeric derivative
against the exact gradient (float64 GradientTape of the same function, a
reference independent of every finite-difference scheme; n/a where a checker
only returns a verdict), and whether its verdict was right (the function is
correct, so right = pass). Results are written to
bench/results/check_speed-<UTC time>.json; bench/report.py renders
docs/benchmarks.md from every results file (medians across runs).

    python bench/check_speed.py                 # all sizes, every peer
    python bench/check_speed.py --sizes 1k 10k --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from results_io import machine, write_results  # noqa: E402  (bench/ is on sys.path)
from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

from gradcli.analyses.check import CheckOptions, check_model  # noqa: E402
from gradcli.model.loading import load_model  # noqa: E402
from mlp import AUTO_SIZE, BATCH, PARAMS, SIZES, torch_loss, write_model  # noqa: E402

def exact_gradient(model) -> np.ndarray:
    point = {n: tf.constant(v) for n, v in model.point.items()}
    with tf.GradientTape() as tape:
        tape.watch([point[n] for n in PARAMS])
        loss = model.function(point)["output"]
    return np.concatenate([g.numpy().ravel() for g in tape.gradient(loss, [point[n] for n in PARAMS])])


def row(checker, seconds, error, right, note="", cpu=None):
    return {
        "checker": checker, "seconds": seconds, "cpu_seconds": cpu, "max_error": error,
        "verdict_right": right, "note": note,
    }


# -- the checkers: each returns (seconds, max error or None, verdict, note) -----


def run_gradcli(path, mode, budget=None):
    options = CheckOptions(mode=mode) if budget is None else CheckOptions(mode=mode, budget=budget)
    started = time.perf_counter()
    result = check_model(load_model(path), options)
    seconds = time.perf_counter() - started
    ok = all(p.verdict == "pass" for p in result.pairs)
    # analytic = exact float64 reverse mode, so |analytic - numeric| is the numeric error
    # (in fast mode: of the projections).
    error = max(p.max_abs_error for p in result.pairs)
    note = f"{result.evaluations} evaluations"
    if mode == "auto":
        note = f"ran {result.mode}: " + "; ".join(n for n in result.notes if n.startswith("auto"))
    return seconds, error, ok, note


def run_tf(model, exact):
    fixed = {n: tf.constant(v) for n, v in model.point.items() if n not in PARAMS}
    params = [tf.constant(model.point[n]) for n in PARAMS]

    def f(*values):
        return model.function({**fixed, **dict(zip(PARAMS, values))})["output"]

    started = time.perf_counter()
    theoretical, numerical = tf.test.compute_gradient(f, params)
    seconds = time.perf_counter() - started
    numeric = np.concatenate([np.asarray(j).ravel() for j in numerical])
    analytic = np.concatenate([np.asarray(j).ravel() for j in theoretical])
    ok = bool(np.allclose(numeric, analytic, rtol=1e-6, atol=1e-6))  # assertAllClose defaults
    return seconds, float(np.max(np.abs(numeric - exact))), ok, "verdict: assertAllClose defaults"


def torch_function(model):
    import torch

    return torch_loss(*(torch.tensor(model.point[n], dtype=torch.float64) for n in ("x", "y")))


def run_torch(model, fast_mode):
    import torch

    params = tuple(
        torch.tensor(model.point[n], dtype=torch.float64, requires_grad=True) for n in PARAMS
    )
    f = torch_function(model)
    started = time.perf_counter()
    ok = torch.autograd.gradcheck(f, params, fast_mode=fast_mode, raise_exception=False)
    return time.perf_counter() - started, None, bool(ok), "returns a verdict only"


def run_jax(model):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.test_util import check_grads

    x, y = jnp.asarray(model.point["x"]), jnp.asarray(model.point["y"])

    def f(W1, b1, W2, b2, W3, b3):
        h = jnp.tanh(x @ W1 + b1)
        h = jnp.tanh(h @ W2 + b2)
        return jnp.mean((h @ W3 + b3 - y) ** 2)

    params = tuple(jnp.asarray(model.point[n]) for n in PARAMS)
    started = time.perf_counter()
    try:
        check_grads(f, params, order=1, modes=("rev",))
        ok, note = True, "returns a verdict only"
    except AssertionError as exc:
        ok, note = False, "false failure: " + " ".join(str(exc).split())[:160]
    return time.perf_counter() - started, None, ok, note


def peers():
    """(label, runner(model, exact) or None, why skipped)."""
    found = []
    found.append(("tf.test.compute_gradient", run_tf, ""))
    try:
        import torch  # noqa: F401

        found.append(("torch gradcheck", lambda m, e: run_torch(m, False), ""))
        found.append(("torch gradcheck fast_mode", lambda m, e: run_torch(m, True), ""))
    except ImportError:
        found.append(("torch gradcheck", None, "torch not installed (pip install 'gradcli[bench]')"))
    try:
        import jax  # noqa: F401

        found.append(("jax check_grads", lambda m, e: run_jax(m), ""))
    except ImportError:
        found.append(("jax check_grads", None, "jax not installed (pip install 'gradcli[bench]')"))
    return found


def median_run(runner, repeat):
    """Median wall seconds of ``repeat`` runs, and the median CPU seconds of the
    process (all its threads) beside them: CPU time moves less when other work
    shares the cores, wall time is what a user waits."""
    runs, cpu = [], []
    for _ in range(repeat):
        started = time.process_time()
        runs.append(runner())
        cpu.append(time.process_time() - started)
    seconds = statistics.median(r[0] for r in runs)
    return (seconds,) + runs[-1][1:], statistics.median(cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=["1k", "10k", "43k"], choices=[s for s in SIZES if s != AUTO_SIZE])
    parser.add_argument("--repeat", type=int, default=1, help="runs per checker; the median is kept")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    parser.add_argument(
        "--threads", type=int, default=None,
        help="intra-op threads for TensorFlow and torch (default: each library's own); "
        "on a shared machine torch's spinning OpenMP threads can cost it 10x",
    )
    args = parser.parse_args()
    started_on = machine()  # load and time at the start; write_results adds the end
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    folder = tempfile.mkdtemp(prefix="gradcli-bench-")
    rows = []
    print(f"tensorflow {tf.__version__}, MLP loss 16-n-4, tanh, batch {BATCH}; median of {args.repeat}")
    header = f"{'size':>5} {'params':>7} | {'checker':<26} {'seconds':>8} {'cpu s':>8} {'max error':>10} {'verdict':>8}  note"
    print(header)
    print("-" * len(header))

    def report(size, n, entry):
        entry.update(size=size, params=n)
        rows.append(entry)
        error = "n/a" if entry["max_error"] is None else f"{entry['max_error']:.2e}"
        verdict = {True: "right", False: "WRONG", None: "-"}[entry["verdict_right"]]
        seconds = "skipped" if entry["seconds"] is None else f"{entry['seconds']:8.3f}"
        cpu = "" if entry["cpu_seconds"] is None else f"{entry['cpu_seconds']:8.3f}"
        print(f"{size:>5} {n:>7} | {entry['checker']:<26} {seconds:>8} {cpu:>8} {error:>10} {verdict:>8}  {entry['note']}")
        sys.stdout.flush()

    for size in [AUTO_SIZE] + list(args.sizes):
        path = write_model(SIZES[size], folder)
        model = load_model(path)
        n = int(sum(model.point[p].size for p in PARAMS))
        if size == AUTO_SIZE:
            result, cpu = median_run(lambda: run_gradcli(path, "auto"), 1)
            report(size, n, row("gradcli auto", *result, cpu=cpu))
            continue
        exact = exact_gradient(model)
        for mode in ("full", "fast"):
            result, cpu = median_run(lambda: run_gradcli(path, mode), args.repeat)
            report(size, n, row(f"gradcli {mode}", *result, cpu=cpu))
        for label, runner, why in peers():
            if runner is None:
                report(size, n, row(label, None, None, None, why))
                continue
            result, cpu = median_run(lambda: runner(model, exact), args.repeat)
            report(size, n, row(label, *result, cpu=cpu))
    print("max error: the checker's numeric derivative against the exact float64 gradient "
          "(gradcli fast: of its projections); verdict right = pass (the function is correct).")
    if not args.no_save:
        document = {"machine": started_on, "repeat": args.repeat, "threads": args.threads, "rows": rows}
        print("wrote", write_results("check_speed", document))


if __name__ == "__main__":
    main()
