"""Real gradient bugs and correct third-party functions: gradcli against
``tf.test.compute_gradient``.

Each file in ``bench/real_bugs/`` reproduces a gradient bug reported against
TensorFlow/Keras (the issue is named in its docstring) or a correct function
(Keras attention, special functions, an example of the TensorFlow docs), and
says the right verdict in ``RIGHT`` ("pass" or "fail"). For each, this script
runs

* ``gradcli check`` (the library: ``check_batch``, default options), and
* ``tf.test.compute_gradient`` the way TensorFlow's own tests use it: the
  theoretical and numeric Jacobians of every differentiated input at the same
  (float64) point, its default step, and one threshold,
  ``max |theoretical - numeric| < THRESHOLD`` (a NaN fails the comparison),

and prints one row per file: model, right verdict, gradcli's verdict, exit code
and culprit (or the graph site it names), compute_gradient's verdict and
largest error. A "fail" row is caught when the exit code is not 0 (1: a check
failed, 3: the check stopped at a NaN/Inf and said where).

Fixture models of the test suite that are real-bug cases too run from
``tests/models`` (``FROM_TESTS`` gives their right verdict, culprit and options).

A file may also say ``CULPRIT = "..."``: text the code at fault must be named
by (an op type, a function name); the culprit column is then scored (named:
the text, case and all, appears in the culprit or first graph site of a
failing pair, or in the error line, the model's own path left out). False alarms are the files whose right verdict is "pass" and that fail.

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
#: Fixture models of the test suite that are real-bug cases too, run from where they
#: are instead of copied: path -> (right verdict, CULPRIT text or None, check options).
FROM_TESTS = {
    "tests/models/earn_scatter_overwrite.py": ("fail", "TensorScatterUpdate", {}),
    "tests/models/earn_stitch_duplicate.py": ("fail", "DynamicStitch", {}),
    "tests/models/blame_override_wrong.py": ("fail", "BlameSloppySigmoid", {}),
    "tests/models/blame_override_raises.py": ("fail", "Tanh", {}),
    "tests/models/blame_keras_layer.py": ("fail", "Keras layer", {}),
    "tests/models/prec_rule_keras_attention.py": ("pass", None, {}),
    "tests/models/prec_rule_keras_attention_bad.py": ("fail", None, {}),
    "tests/models/prec_rule_resize.py": ("pass", None, {}),
    "tests/models/earn_ste_stop_gradient.py": ("pass", None, {"allow_surrogate": True}),
    "tests/models/earn_ill_wave.py": ("pass", None, {}),
    "tests/models/earn_tie_every_max.py": ("fail", None, {}),
    "tests/models/earn_tie_first_max.py": ("pass", None, {}),
    "tests/models/earn_tie_across_inputs.py": ("fail", None, {}),
    "tests/models/earn_tie_across_inputs_tf.py": ("pass", None, {}),
    # Gradient forms (IndexedSlices, a custom gradient's variables), the
    # cotangent rule and the spread rule (issue 28, items 1, 2, 4, 5).
    "tests/models/forms_gather.py": ("pass", None, {}),
    "tests/models/forms_gather_custom.py": ("pass", None, {}),
    "tests/models/forms_gather_custom_wrong.py": ("fail", "lookup", {}),
    "tests/models/forms_variable.py": ("pass", None, {}),
    "tests/models/forms_variable_wrong.py": ("fail", None, {}),
    "tests/models/upstream_right.py": ("pass", None, {}),
    "tests/models/upstream_ignores.py": ("fail", "square", {}),
    "tests/models/upstream_magnitude.py": ("fail", "square", {}),
    "tests/models/spread_softclip.py": ("pass", None, {}),
    "tests/models/spread_softclip_wrong.py": ("fail", "softclip", {}),
    "tests/models/spread_keras.py": ("pass", None, {}),
    "tests/models/spread_keras_wrong.py": ("fail", "softclip", {}),
    "tests/models/spread_log.py": ("pass", None, {}),
    "tests/models/complex_output.py": ("pass", None, {}),
    "tests/models/complex_output_wrong.py": ("fail", None, {}),
    # Nested values and sparse inputs (issue 31, items 2 and 3).
    "tests/models/nest_pytree.py": ("pass", None, {}),
    "tests/models/nest_pytree_wrong.py": ("fail", "affine", {}),
    "tests/models/sparse_input.py": ("pass", None, {}),
    "tests/models/sparse_input_wrong.py": ("fail", "square", {}),
    # Complex inputs under TensorFlow's convention (issue 31, item 1).
    "tests/models/complex_input.py": ("pass", None, {}),
    "tests/models/complex_input_wrong.py": ("fail", None, {}),
}


def gradcli_row(path, options=None):
    from gradcli.options import CheckOptions
    from gradcli.workers.batch import check_batch
    from gradcli.render.text import model_verdict

    result = check_batch([path], CheckOptions(**(options or {})))
    (model,) = result.models
    where = ""
    if model.not_the_users_function:
        where = f"not the user's function: {model.call_proof.detail}"
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
    # What names the code at fault: the culprit (or first graph site) of the first
    # failing pair, or the error line, less the model file's own path.
    said = " ".join([where, model.error or ""]).replace(path, "").replace(os.path.basename(path), "")
    return verdict, result.exit_code, where, said


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
        known = FROM_TESTS.get(os.path.relpath(path, os.path.dirname(HERE)))
        if known is not None:
            right, culprit, options = known
        else:
            right, culprit, options = _declared(path, "RIGHT"), _declared(path, "CULPRIT", required=False), {}
        started = time.perf_counter()
        verdict, code, where, said = gradcli_row(path, options)
        cg_verdict, cg_error = compute_gradient_row(path)
        named = None if culprit is None else culprit in said
        rows.append((name, right, verdict, code, where, named, cg_verdict, cg_error,
                     time.perf_counter() - started))
    header = ("model", "right", "gradcli verdict", "exit", "culprit / site", "named", "ok",
              "compute_gradient", "max err", "ok")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    gradcli_right = cg_right = 0
    for name, right, verdict, code, where, named, cg, err, _ in rows:
        ok = (code == 0) == (right == "pass")
        cg_ok = (cg == "pass") == (right == "pass")
        gradcli_right += ok
        cg_right += cg_ok
        named_cell = "-" if named is None else ("yes" if named else "NO")
        print(f"| {name} | {right} | {verdict} | {code} | {_cell(where) or '-'} | {named_cell} "
              f"| {'yes' if ok else 'NO'} | {cg} | {err:.3g} | {'yes' if cg_ok else 'NO'} |")
    passes = [r for r in rows if r[1] == "pass"]
    scored = [r for r in rows if r[5] is not None]
    print(f"\nright verdicts: gradcli {gradcli_right}/{len(rows)}, "
          f"tf.test.compute_gradient (max err < {THRESHOLD:g}) {cg_right}/{len(rows)}")
    print(f"culprit named: gradcli {sum(bool(r[5]) for r in scored)}/{len(scored)} "
          "(compute_gradient names none)")
    print(f"false alarms on correct functions: gradcli {sum(r[3] != 0 for r in passes)}/{len(passes)}, "
          f"compute_gradient {sum(r[6] != 'pass' for r in passes)}/{len(passes)}")


def _cell(text):
    return text.replace("|", "/").replace("\n", " ")


def _declared(path, name, required=True):
    with open(path) as handle:
        for line in handle:
            if line.startswith(f"{name} = "):
                return line.split("=", 1)[1].strip().strip("\"'")
    if required:
        raise SystemExit(f"{path}: no {name} = ... line")
    return None


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(HERE))
    root = os.path.dirname(HERE)
    main(sys.argv[1:] or sorted(glob.glob(os.path.join(HERE, "real_bugs", "*.py")))
         + [os.path.join(root, p) for p in FROM_TESTS])
