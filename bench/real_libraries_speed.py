"""gradcli's default check on real libraries' code, in the unit a Keras user knows.

The models are issue 36's (bench/real_libraries/): keras-hub backbones of 2
layers, hidden 32 (about 20k weights: GPT-2, BERT, Llama), BERT-base and GPT-2
small at their real shapes (one BERT-base with a wrong GELU inside: a row
names the failing layers), and tfp.math special functions of 4 elements
(bessel_ive, log_bessel_ive, betaincinv, hyp2f1), built from their constructors
(keras-hub and TensorFlow Probability come from the test extras). Each runs in
a process of its own, so its peak memory is its own: after the imports (not
timed) the child

* times a compiled float32 training step of the same model (a ``tf.function``
  taking the gradient of the sum of squared outputs with respect to every
  weight, or to the function's input), the median of 10 after a warm-up;
* runs ``gradcli.check`` on the file with its defaults (auto mode), and
  reports its seconds, the mode auto chose, the verdict and the evaluations;
* for a function of its input (the tfp.math ones), runs
  ``tf.test.compute_gradient`` (float64) on the same function, the peer a
  TensorFlow user writes today, and the largest difference between its two
  Jacobians (``assertAllClose``'s defaults decide its verdict);
* reports its peak resident memory (``ru_maxrss``) before and after the check.

    python bench/real_libraries_speed.py            # every model
    python bench/real_libraries_speed.py --only tfp_bessel_ive

Results: bench/results/real_libraries_speed-<UTC time>.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "real_libraries")
sys.path[:0] = [HERE, os.path.dirname(HERE)]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def training_step_seconds(module, tf) -> float:
    """Median seconds of a compiled float32 training step of the file's model."""
    if hasattr(module.model, "trainable_variables"):
        model, inputs = module.model, module.inputs
        sources = model.trainable_variables

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                out = model(inputs)
                loss = tf.add_n([tf.reduce_sum(tf.square(o)) for o in tf.nest.flatten(out)])
            return tape.gradient(loss, sources)
    else:
        (name, value), = module.inputs.items()
        x = tf.constant(value, tf.float32)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.square(module.model(x)))
            return tape.gradient(loss, x)
    step()
    times = []
    for _ in range(10):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def compute_gradient_peer(module, tf):
    """(seconds, largest |theoretical - numeric|, verdict) of tf.test.compute_gradient in float64."""
    import numpy as np

    (name, value), = module.inputs.items()
    x = tf.constant(value, tf.float64)
    started = time.perf_counter()
    theoretical, numeric = tf.test.compute_gradient(module.model, [x])
    seconds = time.perf_counter() - started
    difference = float(np.max(np.abs(theoretical[0] - numeric[0])))
    right = bool(np.allclose(theoretical[0], numeric[0], rtol=1e-6, atol=1e-6))
    return seconds, difference, right


def one(path: str) -> dict:
    """The child's measurements of one model file (module docstring)."""
    import importlib.util

    import gradcli
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # its neighbours import, as gradcli loads it
    spec = importlib.util.spec_from_file_location("bench_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = {"model": os.path.basename(path), "training_step_ms": 1e3 * training_step_seconds(module, tf)}
    row["peak_mb_before_check"] = peak_mb()
    started = time.perf_counter()
    result = gradcli.check(path)
    row["gradcli_seconds"] = time.perf_counter() - started
    (checked,) = result.models
    row.update(
        mode=checked.mode, ok=result.ok, evaluations=checked.evaluations,
        verdicts=sorted({p.verdict for p in checked.pairs}), peak_mb=peak_mb(),
        failing_layers=[r.path for r in checked.layers if r.failed],
        weights_and_inputs=_elements(module),
    )
    row["training_steps"] = row["gradcli_seconds"] / (row["training_step_ms"] / 1e3)
    if not hasattr(module.model, "trainable_variables"):
        seconds, difference, right = compute_gradient_peer(module, tf)
        row.update(compute_gradient_seconds=seconds, compute_gradient_max_difference=difference,
                   compute_gradient_right=right)
    return row


def _elements(module) -> int:
    """The elements the default check differentiates: every trainable weight
    of a Keras model (its token ids are integers), else every input."""
    import numpy as np

    if hasattr(module.model, "trainable_variables"):
        return sum(int(np.prod(v.shape)) for v in module.model.trainable_variables)
    return sum(int(np.size(v)) for v in module.inputs.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="model file stems to run (default: all)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one model file, JSON out
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    from results_io import machine, write_results

    paths = sorted(glob.glob(os.path.join(MODELS, "*.py")))
    if args.only:
        paths = [p for p in paths if os.path.basename(p)[:-3] in args.only]
    info, rows = machine(), []
    for path in paths:
        env = {**os.environ, "GRADCLI_IN_PROCESS": "1"}
        done = subprocess.run([sys.executable, __file__, "--one", path], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            rows.append({"model": os.path.basename(path), "error": done.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = rows[-1]
        if "error" in row:
            print(f"{row['model']:24} error: {row['error']}")
            continue
        peer = (f"  compute_gradient {row['compute_gradient_seconds']:.2f} s (max diff "
                f"{row['compute_gradient_max_difference']:.1e})" if "compute_gradient_seconds" in row else "")
        print(f"{row['model']:24} {row['weights_and_inputs']:6d} elements  gradcli {row['gradcli_seconds']:6.2f} s "
              f"({row['mode']}, {'pass' if row['ok'] else 'FAIL'}, {row['evaluations']} evaluations) = "
              f"{row['training_steps']:.0f} training steps of {row['training_step_ms']:.2f} ms; "
              f"peak {row['peak_mb']:.0f} MB (before the check {row['peak_mb_before_check']:.0f}){peer}"
              + (f"; failing layers: {', '.join(row['failing_layers'])}" if row.get("failing_layers") else ""))
    print("wrote", write_results("real_libraries_speed", {"machine": info, "rows": rows}))


if __name__ == "__main__":
    main()
