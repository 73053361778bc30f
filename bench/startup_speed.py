"""Whole-process times: what a user waits for, start-up included.

Each command runs as its own process, ``--runs`` times after one warm-up, and
the median wall and CPU seconds and the peak memory are kept. With
``farm-bench`` on PATH it does the timing (the operating system's accounting of
each finished child); otherwise a loop here does the same with ``os.wait4``.

Commands:

* ``import tensorflow`` alone: the floor every gradcli check pays;
* ``gradcli --help`` (must not import TensorFlow);
* ``gradcli check`` on the smallest bundled sample (sample_models/square.py):
  what gradcli adds on top of the TensorFlow import;
* ``gradcli check --mode full`` on the 43k-parameter MLP of bench/check_speed.py,
  against a script that loads the same model file and runs
  ``tf.test.compute_gradient`` on it (the issue's whole-process target: 8x).

Results go to bench/results/startup_speed-<UTC time>.json (bench/report.py).

    python bench/startup_speed.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from results_io import machine, write_results  # noqa: E402

COMPUTE_GRADIENT_SCRIPT = textwrap.dedent(
    """
    # What a user writes to check a model file with TensorFlow's own checker.
    import importlib.util, sys
    import numpy as np
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location("m", sys.argv[1])
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    point = {k: tf.constant(v, tf.float64) for k, v in m.inputs(np.random.default_rng(0)).items()}
    fixed = {k: v for k, v in point.items() if k not in m.wrt}

    def f(*values):
        return m.model(**fixed, **dict(zip(m.wrt, values)))

    theoretical, numerical = tf.test.compute_gradient(f, [point[k] for k in m.wrt])
    worst = max(float(np.max(np.abs(t - n))) for t, n in zip(theoretical, numerical))
    print("max |theoretical - numerical|", worst)
    """
)


def gradcli_command() -> list[str]:
    found = shutil.which("gradcli")
    return [found] if found else [sys.executable, "-m", "gradcli"]


def time_with_farm_bench(command, runs, warmup) -> dict:
    out = subprocess.run(
        ["farm-bench", "-n", str(runs), "--warmup", str(warmup), "--timeout", "3600", "--", *command],
        capture_output=True, text=True, check=True,
    ).stdout

    def median(label):
        match = re.search(rf"^A {label}\s+\S+\s+(\S+)\s+\S+", out, re.M)
        return float(match.group(1)) if match else None

    return {"wall": median("wall s"), "cpu": median("cpu s"), "peak_mib": median("peak MiB"), "timer": "farm-bench"}


def time_with_loop(command, runs, warmup) -> dict:
    walls, cpus, peaks = [], [], []
    for i in range(warmup + runs):
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if i >= warmup:
            walls.append(wall)
            cpus.append(usage.ru_utime + usage.ru_stime)
            peaks.append(usage.ru_maxrss / 1024)
    return {
        "wall": statistics.median(walls), "cpu": statistics.median(cpus),
        "peak_mib": statistics.median(peaks), "timer": "wait4 loop",
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--runs-43k", type=int, default=1, help="runs of the 43k-parameter pair")
    parser.add_argument("--no-43k", action="store_true", help="skip the 43k-parameter pair")
    parser.add_argument("--only-43k", action="store_true", help="run only the 43k-parameter pair")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    started_on = machine()  # load and time at the start; write_results adds the end
    from mlp import SIZES, write_model

    folder = tempfile.mkdtemp(prefix="gradcli-startup-")
    script = os.path.join(folder, "compute_gradient_check.py")
    with open(script, "w") as f:
        f.write(COMPUTE_GRADIENT_SCRIPT)
    gradcli = gradcli_command()
    square = os.path.join(ROOT, "sample_models", "square.py")
    cases = [
        ("import tensorflow", [sys.executable, "-c", "import tensorflow"]),
        ("gradcli --help", gradcli + ["--help"]),
        ("gradcli check square.py", gradcli + ["check", square]),
    ]
    if args.only_43k:
        cases = []
    if not args.no_43k:
        mlp = write_model(SIZES["43k"], folder)
        cases += [
            ("gradcli check --mode full (43k)", gradcli + ["check", "--mode", "full", mlp]),
            ("compute_gradient script (43k)", [sys.executable, script, mlp]),
        ]
    timer = time_with_farm_bench if shutil.which("farm-bench") else time_with_loop
    env_note = "TF_CPP_MIN_LOG_LEVEL=3"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    rows = []
    print(f"{'command':<34} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}  (median of {args.runs}; {env_note})")
    for label, command in cases:
        # The 43k pair takes minutes a run: --runs-43k runs and no warm-up.
        runs, warmup = (args.runs, 1) if "43k" not in label else (args.runs_43k, 0)
        figures = timer(command, runs, warmup)
        rows.append({"command": label, "argv": command, "runs": runs, **figures})
        print(f"{label:<34} {figures['wall']:8.2f} {figures['cpu']:8.2f} {figures['peak_mib']:9.0f}")
        sys.stdout.flush()
    by = {r["command"]: r for r in rows}
    if "gradcli check square.py" in by:
        for what in ("wall", "cpu"):
            added = by["gradcli check square.py"][what] - by["import tensorflow"][what]
            print(f"gradcli check square.py adds {added:.2f} {what} s to the TensorFlow import")
    if "compute_gradient script (43k)" in by:
        for what in ("wall", "cpu"):
            ratio = by["compute_gradient script (43k)"][what] / by["gradcli check --mode full (43k)"][what]
            print(f"whole process at 43k, {what}: compute_gradient script / gradcli check --mode full = {ratio:.1f}x")
    if not args.no_save:
        print("wrote", write_results("startup_speed", {"machine": started_on, "rows": rows}))


if __name__ == "__main__":
    main()
