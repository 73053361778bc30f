"""Real gradient bugs and correct third-party functions: gradcli against
``tf.test.compute_gradient``.

Each file in ``bench/real_bugs/`` reproduces a gradient bug reported against
TensorFlow/Keras (the issue is named in its docstring) or a correct function
(Keras attention, special functions, an example of the TensorFlow docs), and
says the right verdict in ``RIGHT`` ("pass" or "fail"). For each, this script
runs

* ``gradcli check`` (the library: ``check_paths``, default options), and
* ``tf.test.compute_gradient`` the way TensorFlow's own tests use it: the
  theoretical and numeric Jacobians of every differentiated input at the same
  (float64) point, its default step, and one threshold,
  ``max |theoretical - numeric| < THRESHOLD`` (a NaN fails the comparison),

and prints one row per file: model, right verdict, gradcli's verdict, exit code
and culprit (or the graph site it names), compute_gradient's verdict and
largest error. A "fail" row is caught when the exit code is not 0 (1: a check
failed, 3: the check stopped at a NaN/Inf and said where).

    python bench/real_bugs.py [FILE...]
"""

from __future__ import annotations

import glob
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: The threshold TensorFlow's gradient tests typically give compute_gradient's max error.
THRESHOLD = 1e-4


def gradcli_row(path):
    from gradcli.analyses.check import CheckOptions, check_paths
    from gradcli.render.text import model_verdict

    result = check_paths([path], CheckOptions())
    (model,) = result.models
    where = ""
    for pair in model.pairs:
        if pair.culprit is not None:
            site = pair.culprit.site
            where = f"{site.description} @ {_short(site.location)}"
            break
        if pair.failed and pair.sites:
            where = f"{pair.sites[0].description} @ {_short(pair.sites[0].location)}"
            break
    verdict = model_verdict(model)
    if model.error is not None:
        verdict = "error: " + model.error.split(": ", 2)[-1][:60]
    return verdict, result.exit_code, where


def compute_gradient_row(path):
    import tensorflow as tf

    from gradcli.model.loading import load_model

    try:
        model = load_model(path)
    except Exception as exc:  # the model itself is not finite at the point
        return f"not run ({type(exc).__name__})", float("nan")
    worst = 0.0
    try:
        for name in model.wrt:
            def f(x, name=name):
                outputs = model.function({**model.point, name: x})
                return tf.concat([tf.reshape(tf.cast(v, tf.float64), [-1]) for v in outputs.values()
                                  if v.dtype.is_floating], 0)

            theoretical, numerical = tf.test.compute_gradient(f, [model.point[name]])
            error = float(np.max(np.abs(theoretical[0] - numerical[0]), initial=0.0))
            worst = error if not np.isfinite(error) else max(worst, error)
            if not np.isfinite(worst):
                break
    except Exception as exc:
        return f"raises {type(exc).__name__}", float("nan")
    return ("pass" if worst < THRESHOLD else "fail"), worst


def _short(location):
    return os.path.basename(location) if location else "?"


def main(paths):
    rows = []
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        right = _right(path)
        started = time.perf_counter()
        verdict, code, where = gradcli_row(path)
        cg_verdict, cg_error = compute_gradient_row(path)
        rows.append((name, right, verdict, code, where, cg_verdict, cg_error,
                     time.perf_counter() - started))
    header = ("model", "right", "gradcli verdict", "exit", "culprit / site", "ok",
              "compute_gradient", "max err", "ok")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    gradcli_right = cg_right = 0
    for name, right, verdict, code, where, cg, err, _ in rows:
        ok = (code == 0) == (right == "pass")
        cg_ok = (cg == "pass") == (right == "pass")
        gradcli_right += ok
        cg_right += cg_ok
        print(f"| {name} | {right} | {verdict} | {code} | {where or '-'} | {'yes' if ok else 'NO'} "
              f"| {cg} | {err:.3g} | {'yes' if cg_ok else 'NO'} |")
    print(f"\nright verdicts: gradcli {gradcli_right}/{len(rows)}, "
          f"tf.test.compute_gradient (max err < {THRESHOLD:g}) {cg_right}/{len(rows)}")


def _right(path):
    with open(path) as handle:
        for line in handle:
            if line.startswith("RIGHT = "):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise SystemExit(f"{path}: no RIGHT = ... line")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(HERE))
    main(sys.argv[1:] or sorted(glob.glob(os.path.join(HERE, "real_bugs", "*.py"))))
