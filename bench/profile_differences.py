"""Where a full check's difference batches spend their time, piece by piece.

For the largest input of the 43k MLP (W2, 256 x 150 = 38,400 elements) one
chunk of first-pass points (x +- h e_i, the chunk size finite_diff picks) is
timed in parts, each a traced function of its own, after one untimed call:

* ``build one-hot``: the perturbed points as before this change, x + s * one_hot(i) * h;
* ``build tile + scatter``: tiled copies of x, then a scatter of +-h into them;
* ``build x + scatter_nd``: x plus a scattered matrix of +-h (the batched path, now used for dense directions only);
* ``evaluate``: the model on prebuilt points (``vectorized_map``: a batched copy,
  the transposes pfor inserts for the matmul, the matmul itself);
* ``chunk``: ``FiniteDifferences._central`` on one chunk, as the check runs it
  (now in place, plain: the first chunk of a group);
* ``trace``: the first call of a group's traced chunk function (paid once per
  input group);
* ``in place, plain`` / ``in place, XLA``: the in-place loop
  (``numerics.in_place``: no point is built, one variable is set, evaluated and
  restored per direction) on IN_PLACE_CHUNK directions, without and with XLA;
* ``in place, XLA, 2 workers (wall)``: the same split over two threads, wall
  time (CPU time adds up over the threads, so only wall shows the gain).

The first three rows are how points were built before the in-place loop; they
stay so the table shows what the loop removed.

Each build is fetched as numpy, which adds one copy to every build row alike.
Times are CPU seconds of the process per perturbed point (median of ``--repeat``),
with one intra-op thread, so that other work on the machine moves them little.
Results: bench/results/profile_differences-<UTC time>.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

from gradcli.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

import numpy as np  # noqa: E402

from gradcli.model.loading import load_model  # noqa: E402
from gradcli.numerics import in_place  # noqa: E402
from gradcli.numerics.finite_diff import IN_PLACE_CHUNK, FiniteDifferences, chunk_size, step_size  # noqa: E402
from mlp import SIZES, write_model  # noqa: E402
from results_io import machine, write_results  # noqa: E402


def cpu_per_call(fn, repeat, clock=time.process_time):
    """Median seconds of ``repeat`` calls after one untimed call, by ``clock``."""
    fn()
    times = []
    for _ in range(repeat):
        started = clock()
        fn()
        times.append(clock() - started)
    return statistics.median(times)


def wall_per_call(fn, repeat):
    return cpu_per_call(fn, repeat, clock=time.perf_counter)


def in_place_rows(model, name, repeat) -> dict:
    """Seconds per call of the in-place loop on IN_PLACE_CHUNK directions of
    ``name``, keyed by label, and the number of points per call."""
    x = model.point[name].reshape(-1)
    k = min(IN_PLACE_CHUNK, x.size)
    fd = FiniteDifferences(model.function, model.point, ["output"], wrt=list(model.wrt))
    evaluate = fd.evaluator.group_function((name,))
    part = np.arange(k)
    steps = (x[:k] + step_size(x[:k], x.dtype)) - x[:k]
    shapes = {"output": tf.TensorShape([])}
    rows = {}
    for label, policy, workers, clock in (
        ("in place, plain (now: small groups)", False, 1, cpu_per_call),
        ("in place, XLA (now: large float64 groups)", True, 1, cpu_per_call),
        ("in place, XLA, 2 workers (wall)", True, 2, wall_per_call),
    ):
        loop = in_place.InPlaceLoop(evaluate, x, ["output"], shapes, policy, k)
        original = in_place.workers
        in_place.workers = lambda: workers  # noqa: E731
        try:
            rows[label] = clock(lambda: loop(part, steps), repeat)
        finally:
            in_place.workers = original
    return rows, 2 * k


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started_on = machine()  # load and time at the start; write_results adds the end
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    model = load_model(write_model(SIZES["43k"], tempfile.mkdtemp()))
    name = "W2"
    x = model.point[name].reshape(-1)
    n = x.size
    k = chunk_size(n)
    points = 2 * k
    idx = tf.constant(np.arange(k), tf.int64)
    h = tf.constant((x[:k] + step_size(x[:k], x.dtype)) - x[:k])
    flat = tf.constant(x)
    others = {m: tf.constant(v) for m, v in model.point.items() if m != name}
    shape = model.point[name].shape

    def evaluate(row):
        return model.function({**others, name: tf.reshape(row, shape)})["output"]

    @tf.function(autograph=False)
    def one_hot(idx, h):
        scaled = tf.one_hot(idx, n, dtype=tf.float64) * h[:, None]
        return tf.concat([flat + scaled, flat - scaled], 0)

    def where():
        return tf.stack([tf.range(points, dtype=tf.int64), tf.tile(idx, [2])], axis=1)

    @tf.function(autograph=False)
    def tile_scatter(idx, h):
        copies = tf.tile(flat[None], [points, 1])
        return tf.tensor_scatter_nd_add(copies, where(), tf.concat([h, -h], 0))

    @tf.function(autograph=False)
    def sparse_add(idx, h):
        steps = tf.scatter_nd(where(), tf.concat([h, -h], 0), [points, n])
        return flat[None] + steps

    @tf.function(autograph=False)
    def evaluate_all(rows):
        return tf.vectorized_map(evaluate, rows)

    prebuilt = sparse_add(idx, h)
    fd = FiniteDifferences(model.function, model.point, ["output"], wrt=list(model.wrt))
    part = np.arange(k) + fd.offset(name)
    steps = h.numpy()
    started = time.process_time()
    fd._central(fd.group(name), "axes", part, steps)
    trace = time.process_time() - started
    parts = {
        "build one-hot": cpu_per_call(lambda: one_hot(idx, h).numpy(), args.repeat),
        "build tile + scatter": cpu_per_call(lambda: tile_scatter(idx, h).numpy(), args.repeat),
        "build x + scatter_nd (batched path)": cpu_per_call(lambda: sparse_add(idx, h).numpy(), args.repeat),
        "evaluate (batched path)": cpu_per_call(lambda: evaluate_all(prebuilt).numpy(), args.repeat),
        "chunk (now: in place, plain at first)": cpu_per_call(lambda: fd._central(fd.group(name), "axes", part, steps), args.repeat),
    }
    chunk_cpu = parts["chunk (now: in place, plain at first)"]
    parts["trace (first chunk minus a chunk)"] = trace - chunk_cpu
    loop_rows, loop_points = in_place_rows(model, name, args.repeat)
    rows = []
    print(f"W2: {n} elements, chunk of {k} directions = {points} points, {n * 8 / 1024:.0f} KiB a point")
    for label, seconds in parts.items():
        per_point = seconds / points if "trace" not in label else None
        rows.append({"part": label, "cpu_seconds": seconds, "cpu_us_per_point": None if per_point is None else per_point * 1e6})
        print(f"{label:<36} {seconds * 1e3:9.1f} ms" + ("" if per_point is None else f"  {per_point * 1e6:7.1f} us/point"))
    for label, seconds in loop_rows.items():
        per_point = seconds / loop_points
        rows.append({"part": label, "cpu_seconds": seconds, "cpu_us_per_point": per_point * 1e6})
        print(f"{label:<36} {seconds * 1e3:9.1f} ms  {per_point * 1e6:7.1f} us/point ({loop_points} points)")
    full = chunk_cpu / points * 2 * n
    print(f"first pass over W2 predicted from the chunk: {full:.1f} CPU s ({2 * n} points)")
    if not args.no_save:
        document = {"machine": started_on, "elements": n, "chunk_directions": k, "rows": rows}
        print("wrote", write_results("profile_differences", document))


if __name__ == "__main__":
    main()
