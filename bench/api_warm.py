"""A warm call of the Python API, as a loop in a test suite or a notebook makes it.

``fast_cold.py`` times a check as a CI job meets it (a fresh process, a 43k
model). A user of ``gradcli.check(f, (x,))`` in a loop, like torch's
``gradcheck(f, (x,))`` or jax's ``check_grads(f, (x,), 1)``, pays the warm
call instead: here f(x) = sin(x) * x on 6 float64 elements, each checker
called ``--warmup`` times, then ``--calls`` timed calls (wall and CPU, all
threads), median and minimum per call; then the same for f(x) = tanh(x) * x
with tanh's gradient written by the user (``FUNCTIONS``). gradcli runs its default check
(``auto``, which picks the full check here: every element, reverse and
forward mode, the precision rule and the proof that it checked the user's
function). TensorFlow's "triggered tf.function retracing" warnings during
all of gradcli's calls are counted: a warm call should trace nothing.

Peers run when importable (``pip install 'gradcli[bench]'``; see README):
torch ``gradcheck`` (default, slow mode), jax ``check_grads(order=1)``.

Results: bench/results/api_warm-<UTC time>.json (rendered by report.py).

    python bench/api_warm.py --calls 30
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from results_io import machine, write_results  # noqa: E402

import numpy as np  # noqa: E402

POINT = np.linspace(0.1, 0.6, 6)


def gradcli_checker(threads, own):
    import gradcli
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)

    @tf.custom_gradient
    def tanh(x):
        y = tf.tanh(x)
        return y, lambda dy: dy * (1 - y * y)

    def f(x):
        return (tanh(x) if own else tf.sin(x)) * x

    return lambda: gradcli.check(f, inputs=(POINT,)).ok  # inputs= runs on earlier versions too (A/B)


def torch_checker(threads, own):
    import torch

    if threads:
        torch.set_num_threads(threads)

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return dy * (1 - y * y)

    x = torch.tensor(POINT, dtype=torch.float64, requires_grad=True)
    f = (lambda x: Tanh.apply(x) * x) if own else (lambda x: torch.sin(x) * x)
    return lambda: bool(torch.autograd.gradcheck(f, (x,), raise_exception=False))


def jax_checker(threads, own):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.test_util import check_grads

    @jax.custom_vjp
    def tanh(x):
        return jnp.tanh(x)

    tanh.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, dy: (dy * (1 - y * y),))
    x = jnp.asarray(POINT)
    f = (lambda x: tanh(x) * x) if own else (lambda x: jnp.sin(x) * x)

    def call():
        check_grads(f, (x,), order=1, modes=["rev"])  # raises when wrong
        return True

    return call


CHECKERS = {"gradcli check": gradcli_checker, "torch gradcheck": torch_checker, "jax check_grads": jax_checker}
#: The functions checked: TensorFlow's own ops, and one gradient the user
#: wrote (tf.custom_gradient, torch.autograd.Function, jax.custom_vjp), which
#: gradcli also checks alone over a spread of inputs (its spread rule).
FUNCTIONS = {"sin(x) x": False, "own tanh(x) x": True}


class Retracing(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += "retracing" in record.getMessage()


def timed(call, warmup, calls):
    for _ in range(warmup):
        ok = call()
    walls, cpus = [], []
    for _ in range(calls):
        wall, cpu = time.perf_counter(), time.process_time()
        ok = call() and ok
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started_on = machine()
    rows = []
    print(f"{'function':<14} {'checker':<16} {'median ms':>10} {'min ms':>8} {'cpu ms':>8}  verdict  retracing warnings")
    for (function, own), (name, make) in itertools.product(FUNCTIONS.items(), CHECKERS.items()):
        try:
            call = make(args.threads, own)
        except ImportError:
            print(f"{function:<14} {name:<16} not installed (pip install 'gradcli[bench]')")
            continue
        retracing = Retracing()
        logging.getLogger("tensorflow").addHandler(retracing)
        try:
            walls, cpus, ok = timed(call, args.warmup, args.calls)
        finally:
            logging.getLogger("tensorflow").removeHandler(retracing)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        warnings = retracing.count if name.startswith("gradcli") else None
        rows.append({
            "checker": name, "function": function, "call": "warm", "wall": wall, "cpu": cpu, "min_wall": min(walls),
            "retracing_warnings": warnings,
            "note": f"{wall * 1e3:.2f} ms median, {min(walls) * 1e3:.2f} ms min of {args.calls}; "
                    + ("verdict right (pass)" if ok else "WRONG verdict")
                    + ("" if warnings is None else f"; {warnings} retracing warnings"),
        })
        print(f"{function:<14} {name:<16} {wall * 1e3:10.2f} {min(walls) * 1e3:8.2f} {cpu * 1e3:8.2f}  "
              f"{'right' if ok else 'WRONG'}    {'' if warnings is None else warnings}")
    if not args.no_save:
        document = {"machine": started_on, "warmup": args.warmup, "calls": args.calls,
                    "threads": args.threads, "rows": rows}
        print("wrote", write_results("api_warm", document))


if __name__ == "__main__":
    main()
