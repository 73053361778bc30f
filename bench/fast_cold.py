"""Fast checks as a user meets them: the first check in a fresh process.

``check_speed.py`` runs every checker in one process, so torch's fast mode runs
after its slow mode has warmed autograd up, and gradcli's fast check after
gradcli's full one. A CI job or a one-off check runs one check in a new
process. Here each fast checker runs in its own fresh process (``--runs``
times): the imports are done first and not timed, then the first check is
timed, wall and CPU (all threads), on the 43k MLP of ``mlp.py``:

* gradcli: ``check_model(load_model(path), CheckOptions(mode="fast"))`` (the
  load is timed too: it runs the model once, as torch's check does);
* torch: ``torch.autograd.gradcheck(f, params, fast_mode=True)`` on the same
  function and point (float64; the point gradcli loaded, saved by its first
  run, so the torch process never imports TensorFlow);
* then a second, warm call in the same process of each, for comparison with
  check_speed.py.

Results: bench/results/fast_cold-<UTC time>.json (rendered by report.py).

    python bench/fast_cold.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mlp import SIZES, write_model  # noqa: E402
from results_io import machine, write_results  # noqa: E402

CHILD = r"""
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path[:0] = [{bench!r}, {root!r}]
checker, path, threads, saved = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    ok = call()
    return {{"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu, "ok": ok}}

if checker == "gradcli":
    from gradcli.tf_import import import_tensorflow
    tf = import_tensorflow()
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from gradcli.analyses.check import CheckOptions, check_model
    from gradcli.model.loading import load_model

    def call():
        model = load_model(path)
        result = check_model(model, CheckOptions(mode="fast"))
        if not os.path.exists(saved):  # the point, for torch (after the timing)
            import numpy as np
            np.savez(saved, **{{n: np.asarray(v) for n, v in model.point.items()}})
        return all(p.verdict == "pass" for p in result.pairs)
else:  # no TensorFlow in this process: the point gradcli checked, from its file
    import numpy as np
    import torch
    if threads:
        torch.set_num_threads(threads)
    from mlp import PARAMS as names, torch_loss

    point = dict(np.load(saved))
    f = torch_loss(torch.tensor(point["x"]), torch.tensor(point["y"]))

    def call():
        params = tuple(torch.tensor(point[n], dtype=torch.float64, requires_grad=True) for n in names)
        return bool(torch.autograd.gradcheck(f, params, fast_mode=True, raise_exception=False))

print(json.dumps({{"cold": timed(call), "warm": timed(call)}}))
"""


def run_child(checker, path, threads):
    script = CHILD.format(bench=HERE, root=os.path.dirname(HERE))
    saved = os.path.join(os.path.dirname(path), "point.npz")
    out = subprocess.run(
        [sys.executable, "-c", script, checker, path, str(threads or 0), saved],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started_on = machine()
    path = write_model(SIZES["43k"], tempfile.mkdtemp(prefix="gradcli-bench-"))
    checkers = ["gradcli"]
    try:
        import torch  # noqa: F401

        checkers.append("torch fast_mode")
    except ImportError:
        print("torch not installed (pip install 'gradcli[bench]'): gradcli only")
    rows = []
    print(f"{'checker':<16} {'call':<5} {'wall s':>8} {'cpu s':>8}  verdict   (median of {args.runs} fresh processes)")
    for checker in checkers:
        runs = [run_child("gradcli" if checker == "gradcli" else "torch", path, args.threads) for _ in range(args.runs)]
        for call in ("cold", "warm"):
            wall = statistics.median(r[call]["seconds"] for r in runs)
            cpu = statistics.median(r[call]["cpu_seconds"] for r in runs)
            right = all(r[call]["ok"] for r in runs)
            rows.append({
                "checker": checker, "call": call, "wall": wall, "cpu": cpu,
                "note": "verdict right (pass)" if right else "WRONG verdict",
            })
            print(f"{checker:<16} {call:<5} {wall:8.3f} {cpu:8.3f}  {'right' if right else 'WRONG'}")
    if not args.no_save:
        document = {"machine": started_on, "runs": args.runs, "threads": args.threads, "rows": rows}
        print("wrote", write_results("fast_cold", document))


if __name__ == "__main__":
    main()
