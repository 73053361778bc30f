"""Peak memory and wall time of each command on a 20,000-element model.

    python bench/memory_peak.py [--tree PATH] [--dense]

Runs ``python -m gradcli`` on tests/models/mem_20k.py (y = sin(x) * x, 20,000
elements) once per command, each in a fresh interpreter, and prints the peak
resident memory of the run: the largest of gradcli's process and its
supervised workers (``ru_maxrss`` of the reaped children). ``--tree`` runs
another checkout (e.g. the main branch) for a before/after comparison.
``--dense`` adds the commands that build a 20000 x 20000 block: with the
memory guard (gradcli.memory) they stop at once with exit 2; without it they
need over 12 GB, so do not pass --dense to an old tree on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "models" / "mem_20k.py"


def commands(tangent: str, dense: bool) -> list[list[str]]:
    model = str(MODEL)
    runs = [
        ["forward", model],
        ["vjp", model],
        ["jvp", model, "--tangent", f"x=@{tangent}"],
        ["check", model],  # auto: fast mode above 5000 elements
        ["hessian", model],  # auto: Lanczos above 2000 parameters
    ]
    if dense:
        runs += [
            ["jacobian", model],
            ["jacobian", model, "--numeric"],
            ["vjp", model, "--numeric"],
            ["check", model, "--mode", "full"],
            ["hessian", model, "--method", "dense"],
        ]
    return runs


def measure(tree: Path, args: list[str]) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak MB, first stderr line) of one run in a fresh
    process; the peak is read in a child so earlier runs do not mask it."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "started = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "seconds = time.perf_counter() - started\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "line = (done.stderr.strip().splitlines() or [''])[0][:120]\n"
        "print(done.returncode, seconds, peak, line, sep='\\t')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GRADCLI_IN_PROCESS", None)
    out = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "gradcli", *args],
        capture_output=True, text=True, env=env, cwd=tree,
    ).stdout.strip()
    code, seconds, peak, line = (out.split("\t") + [""] * 4)[:4]
    return int(code), float(seconds), float(peak), line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--dense", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tangent = os.path.join(folder, "tangent.npy")
        np.save(tangent, np.ones(20_000))
        print(f"tree {args.tree}, load {os.getloadavg()[0]:.1f}")
        for run in commands(tangent, args.dense):
            code, seconds, peak, line = measure(args.tree, run)
            label = " ".join(re.sub(r"/\S*/", "", a) for a in run)  # file names only
            print(f"  {label:40s} exit {code}  {seconds:6.1f} s  peak {peak:8.0f} MB  {line}")


if __name__ == "__main__":
    main()
