"""Batch runs: one `gradcli check` call over every sample model against one
process per model file, and `--jobs N` against one process.

    python bench/batch_speed.py [--jobs 2] [--slow N]

Each run is a fresh `python -m gradcli check ... --json` subprocess, timed by
wall clock, so TensorFlow's start-up is counted as a user pays it. One call
pays it once; one process per file pays it per file; `--jobs N` pays it once
per worker on top of the parent's. `--slow N` adds a second scenario: N copies
of a model whose full check takes seconds, where parallel workers can win if
the machine has idle cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"

SLOW_MODEL = '''"""y = sum(tanh(W x)^2) with a 40 x 40 W: 1640 differentiated elements."""
import numpy as np
import tensorflow as tf

def model(W, x):
    return tf.reduce_sum(tf.tanh(tf.linalg.matvec(W, x)) ** 2)

inputs = lambda rng: {"W": rng.standard_normal((40, 40)) / 6, "x": rng.standard_normal(40)}
check = {"mode": "full"}
'''


def run(*args) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "check", *map(str, args), "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    document = json.loads(done.stdout)
    return seconds, {m["name"]: m["ok"] for m in document["models"]}


def compare(label: str, files: list[Path], jobs: int) -> None:
    one_call, verdicts = run(*files)
    per_file = 0.0
    for f in files:
        seconds, verdict = run(f)
        per_file += seconds
        assert list(verdict.values()) == [verdicts[next(iter(verdict))]], f
    parallel, verdicts_parallel = run(*files, "--jobs", jobs)
    assert verdicts_parallel == verdicts
    print(f"{label}: {len(files)} models")
    print(f"  one call            {one_call:7.2f} s")
    print(f"  one call per file   {per_file:7.2f} s   ratio {per_file / one_call:5.2f}x slower")
    print(f"  one call, --jobs {jobs}  {parallel:7.2f} s   ratio {parallel / one_call:5.2f}x of one call")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--slow", type=int, default=0, help="copies of a slow model to add a scenario")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    files = sorted(p for p in SAMPLES.glob("*.py") if not p.name.startswith("_"))
    compare("sample models", files, args.jobs)
    if args.slow:
        with tempfile.TemporaryDirectory() as folder:
            slow = []
            for i in range(args.slow):
                path = Path(folder) / f"slow_{i}.py"
                path.write_text(SLOW_MODEL)
                slow.append(path)
            compare("slow models", slow, args.jobs)


if __name__ == "__main__":
    main()
