"""Second-order speed: ``check --order 2`` and ``hessian`` (dense, Lanczos), with peak memory.

The MLP loss of bench/mlp.py at about 1k, 10k and 200k parameters. Each command
runs as its own process (start-up included, as a user runs it) with the
defaults a user gets, and is timed from outside with ``os.wait4``: wall and CPU
seconds and the peak resident memory of the process. A dense Hessian of 200k
parameters would need 200k**2 * 8 bytes = 320 GB, so that case is skipped with
a note; a command over ``--limit`` seconds is stopped and reported as such.

Results go to bench/results/second_order_speed-<UTC time>.json (bench/report.py).
The accuracy of Lanczos against a closed-form spectrum at 200k parameters is
bench/hessian_speed.py's job.

    python bench/second_order_speed.py --sizes 1k 10k 200k
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mlp import write_model  # noqa: E402
from results_io import machine, write_results  # noqa: E402

WIDTHS = {"1k": (16, 24, 20, 4), "10k": (16, 128, 60, 4), "200k": (16, 512, 376, 4)}
#: Beyond this many parameters a dense Hessian (n**2 float64) is not attempted.
DENSE_MAX = 20_000


def parameters(widths) -> int:
    a, b, c, d = widths
    return a * b + b + b * c + c + c * d + d


def run(argv, limit) -> dict:
    """Wall, CPU and peak memory of one process; stopped after ``limit`` seconds."""
    started = time.perf_counter()
    # stdout to a file, not a pipe: a report over the pipe's 64 KB would block the
    # child until it is read, and this loop reads only after the child ends.
    out_file = tempfile.TemporaryFile()
    process = subprocess.Popen(
        argv, stdout=out_file, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = started + limit
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(process.pid, 0)
            return {"wall": None, "note": f"stopped after {limit} s", "peak_mib": usage.ru_maxrss / 1024}
        time.sleep(0.05)
    wall = time.perf_counter() - started
    out_file.seek(0)
    out = out_file.read().decode()
    entry = {
        "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024,
        "exit_code": os.waitstatus_to_exitcode(status), "note": "",
    }
    try:
        document = json.loads(out)
    except ValueError:
        return entry
    document = document.get("result") or document  # the JSON envelope (schema 2)
    model = (document.get("models") or [document.get("model")])[0] or {}
    if "mode" in model:
        entry["note"] = f"mode {model['mode']}, {model.get('evaluations', 0)} evaluations"
    elif "method" in document:
        fd = document.get("fd_check") or {}
        entry["note"] = (
            f"method {document['method']}, eigenvalues {document['smallest']:.6g} .. "
            f"{document['largest']:.6g}" + (f", fd check {fd.get('mode')} ok={fd.get('ok')}" if fd else "")
        )
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=list(WIDTHS), choices=list(WIDTHS))
    parser.add_argument("--limit", type=float, default=600.0, help="seconds before a command is stopped")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started_on = machine()  # load and time at the start; write_results adds the end
    gradcli = [shutil.which("gradcli")] if shutil.which("gradcli") else [sys.executable, "-m", "gradcli"]
    folder = tempfile.mkdtemp(prefix="gradcli-second-order-")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    rows = []
    print(f"{'size':>5} {'params':>7} | {'command':<30} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}  note")
    for size in args.sizes:
        path = write_model(WIDTHS[size], folder)
        n = parameters(WIDTHS[size])
        cases = [
            ("check --order 2", gradcli + ["check", "--order", "2", "--json", path]),
            ("hessian --method lanczos", gradcli + ["hessian", "--method", "lanczos", "--json", path]),
        ]
        if n <= DENSE_MAX:
            cases.append(("hessian --method dense", gradcli + ["hessian", "--method", "dense", "--json", path]))
        else:
            rows.append({"size": size, "params": n, "command": "hessian --method dense", "wall": None,
                         "note": f"skipped: {n}**2 float64 is {n * n * 8 / 1e9:.0f} GB"})
        for label, argv in cases:
            entry = {"size": size, "params": n, "command": label, **run(argv, args.limit)}
            rows.append(entry)
        for entry in rows[-len(cases) - (n > DENSE_MAX):]:
            wall = "-" if entry.get("wall") is None else f"{entry['wall']:8.2f}"
            cpu = "-" if entry.get("cpu") is None else f"{entry['cpu']:8.2f}"
            peak = "-" if entry.get("peak_mib") is None else f"{entry['peak_mib']:9.0f}"
            print(f"{size:>5} {n:>7} | {entry['command']:<30} {wall:>8} {cpu:>8} {peak:>9}  "
                  f"exit {entry.get('exit_code', '-')}; {entry['note']}")
        sys.stdout.flush()
    if not args.no_save:
        print("wrote", write_results("second_order_speed", {"machine": started_on, "rows": rows}))


if __name__ == "__main__":
    main()
