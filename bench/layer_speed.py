"""Layer-by-layer checking of real-size Keras models, against a training step.

Two parts, each model file written to a temporary folder (no weights are
downloaded: ``keras.applications`` with ``weights=None``):

* ``targets``: ``gradcli check FILE --json`` as a user runs it (a fresh
  process, start-up included) on a ResNet-50 (32x32 input, batch 2, 10
  classes, categorical cross-entropy; 23.6M weights) and on a Transformer
  encoder stack built from ``keras.layers.MultiHeadAttention`` (about 1M and
  5M weights, mean squared error), each unmodified and with one wrong layer: in the
  ResNet-50 a custom activation (x sigmoid(x), replacing ``conv3_block2_out``)
  whose gradient is halved where x > 1; in the Transformer a custom layer norm
  whose gradient for gamma is wrong (it uses x instead of the normalized x)
  in one block. Recorded: wall seconds, exit code, the failing layers named.
* ``sizes``: in one process per model (Transformer stacks of about 100k, 1M
  and 5M weights, the ResNet-50 for 25M): a training step (one forward and
  reverse pass of the float32 model and its loss, median of 5 after a warm-up),
  the layer-by-layer pass (``check_layers``), the whole-model fast check
  along joint directions (what ``check`` runs beside the pass), both as
  ``check`` runs them (the joint check on a thread beside the pass), and the
  whole-model fast check input by input (``check_model``, mode fast, no layer
  pass: what ran before; stopped after ``--limit`` seconds), each timed.

Results: bench/results/layer_speed-<UTC time>.json.

    python bench/layer_speed.py            # both parts
    python bench/layer_speed.py --part sizes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from results_io import machine, write_results  # noqa: E402

RESNET = '''
import numpy as np
import tensorflow as tf
import keras

WRONG = {wrong}
#: The gradient is halved where x > THRESHOLD: inputs of conv3_block2_out
#: reach about 0.8 at this point, so a few percent of them are in that range.
THRESHOLD = 0.3


@tf.custom_gradient
def _swish(x):
    s = tf.math.sigmoid(x)

    def grad(dy):
        true = s + x * s * (1 - s)
        return dy * (tf.where(x > THRESHOLD, 0.5 * true, true) if WRONG else true)

    return x * s, grad


class Swish(keras.layers.Layer):
    def call(self, x):
        return _swish(x)


def _replace(layer):
    if layer.name == "conv3_block2_out":
        return Swish(name=layer.name)
    return layer  # the same layer (its weights shared): the network is built once


def _build():
    base = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=10)
    return keras.models.clone_model(base, clone_function=_replace)


model = _build()
loss = "categorical_crossentropy"


def inputs(rng):
    y = np.eye(10, dtype="float32")[rng.integers(0, 10, 2)]
    return {{"x": rng.standard_normal((2, 32, 32, 3)).astype("float32"), "y": y}}
'''

TRANSFORMER = '''
import numpy as np
import tensorflow as tf
import keras

D, HEADS, FF, BLOCKS, SEQ = {d}, {heads}, {ff}, {blocks}, 16
WRONG_BLOCK = {wrong_block}


def _layer_norm(wrong):
    @tf.custom_gradient
    def layer_norm(x, gamma, beta):
        mean = tf.reduce_mean(x, -1, keepdims=True)
        centred = x - mean
        var = tf.reduce_mean(centred**2, -1, keepdims=True)
        inv = tf.math.rsqrt(var + 1e-5)
        xhat = centred * inv

        def grad(dy):
            axes = list(range(len(x.shape) - 1))
            dgamma = tf.reduce_sum(dy * (x if wrong else xhat), axes)
            dbeta = tf.reduce_sum(dy, axes)
            g = dy * gamma
            dx = inv * (g - tf.reduce_mean(g, -1, keepdims=True)
                        - xhat * tf.reduce_mean(g * xhat, -1, keepdims=True))
            return dx, dgamma, dbeta

        return xhat * gamma + beta, grad

    return layer_norm


class LayerNorm(keras.layers.Layer):
    def __init__(self, wrong=False, **kwargs):
        super().__init__(**kwargs)
        self.wrong = wrong
        self.norm = _layer_norm(wrong)

    def build(self, shape):
        self.gamma = self.add_weight(shape=(shape[-1],), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(shape[-1],), initializer="zeros", name="beta")

    def call(self, x):
        return self.norm(x, tf.identity(self.gamma), tf.identity(self.beta))

    def get_config(self):
        return {{**super().get_config(), "wrong": self.wrong}}


def _block(x, i):
    a = keras.layers.MultiHeadAttention(HEADS, D // HEADS, name=f"attention_{{i}}")(x, x)
    x = LayerNorm(name=f"norm_a_{{i}}")(keras.layers.Add(name=f"residual_a_{{i}}")([x, a]))
    f = keras.layers.Dense(FF, activation="gelu", name=f"ff_in_{{i}}")(x)
    f = keras.layers.Dense(D, name=f"ff_out_{{i}}")(f)
    return LayerNorm(wrong=i == WRONG_BLOCK, name=f"norm_b_{{i}}")(keras.layers.Add(name=f"residual_b_{{i}}")([x, f]))


tokens = keras.Input((SEQ, D))
h = tokens
for i in range(BLOCKS):
    h = _block(h, i)
model = keras.Model(tokens, keras.layers.Dense(D, name="head")(h))
loss = "mse"


def inputs(rng):
    return {{"x": rng.standard_normal((2, SEQ, D)).astype("float32"),
            "y": rng.standard_normal((2, SEQ, D)).astype("float32")}}
'''

#: Transformer stacks by target size: (width, heads, feed-forward width, blocks).
SIZES = {"100k": (64, 4, 256, 2), "1M": (128, 4, 512, 5), "5M": (256, 8, 1024, 6)}

CHILD = r"""
import json, os, signal, statistics, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, {root!r})
path, limit = sys.argv[1], int(sys.argv[2])
import numpy as np
from gradcli.tf_import import import_tensorflow
tf = import_tensorflow()
import keras
from gradcli.model.loading import import_model_file, load_model
from gradcli.analyses.check import check_model
from gradcli.analyses.check import check_layers
from gradcli.options import CheckOptions

module = import_model_file(path)
net, data = module.model, module.inputs(np.random.default_rng(0))
loss_fn = keras.losses.get(module.loss)
x, y = tf.constant(data["x"]), tf.constant(data["y"])

def step():
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(loss_fn(y, net(x, training=False)))
    return tape.gradient(value, net.trainable_variables)

step()
times = []
for _ in range(5):
    t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
out = {{"weights": int(sum(np.prod(v.shape) for v in net.trainable_variables)),
        "weight_tensors": len(net.trainable_variables),
        "training_step": statistics.median(times)}}
t = time.perf_counter(); model = load_model(path); out["load"] = time.perf_counter() - t
t = time.perf_counter()
layers, notes = check_layers(model, CheckOptions(mode="fast"))
out["layer_pass"] = time.perf_counter() - t
out["layer_calls"] = len(layers)
out["layers_full"] = sum(r.mode == "full" for r in layers)
out["layers_failed"] = [r.path for r in layers if r.failed]
out["layer_errors"] = [r.path for r in layers if r.error]
out["unit_seconds"] = {{"full": sum(r.seconds for r in layers if r.mode == "full"),
                        "fast": sum(r.seconds for r in layers if r.mode == "fast")}}
out["unit_seconds_slowest"] = sorted(([r.path, r.class_name, r.mode, round(r.seconds, 3)] for r in layers),
                                     key=lambda r: -r[3])[:8]
out["layer_seconds_by_class"] = {{}}
for r in layers:
    out["layer_seconds_by_class"][r.class_name] = out["layer_seconds_by_class"].get(r.class_name, 0.0) + r.seconds
out["notes"] = notes

# The whole-model check along joint directions alone: the pass it runs beside
# is replaced by nothing for this timing.
from gradcli.analyses.check import model as by_layer  # where check_model finds the layer pass
real_pass, by_layer.check_layers = by_layer.check_layers, lambda model, options, plan=None: ([], [])
t = time.perf_counter()
joint = check_model(model, CheckOptions(mode="fast", by_layer=True))
out["joint_check"] = time.perf_counter() - t
out["joint_check_ok"] = joint.ok
by_layer.check_layers = real_pass

# Both, as ``check`` runs them: the joint check beside the layer pass
# (``check_model``; measured after the two alone, so on warm caches).
t = time.perf_counter()
both = check_model(model, CheckOptions(mode="fast", by_layer=True))
out["check_both"] = time.perf_counter() - t
out["check_both_ok"] = both.ok

# Everything so far, in case the parent has to kill the check below: the
# alarm cannot stop it inside one long TensorFlow call.
print(json.dumps({{**out, "fast_check": float(limit), "fast_check_stopped": "killed at the limit"}}), flush=True)

def stop(signum, frame):
    raise TimeoutError()

signal.signal(signal.SIGALRM, stop)
signal.alarm(limit)
t = time.perf_counter()
try:
    whole = check_model(model, CheckOptions(mode="fast", by_layer=False))
    out["fast_check_ok"] = whole.ok
except BaseException as exc:  # the time limit (or anything else): recorded, not fatal
    out["fast_check_stopped"] = type(exc).__name__
signal.alarm(0)
out["fast_check"] = time.perf_counter() - t
print(json.dumps(out))
"""


def write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def transformer(size: str, wrong_block: int = -1) -> str:
    d, heads, ff, blocks = SIZES[size]
    return TRANSFORMER.format(d=d, heads=heads, ff=ff, blocks=blocks, wrong_block=wrong_block)


def run_cli(path: str, limit: int) -> dict:
    """``gradcli check PATH --json`` in a fresh process: wall seconds, exit code, failing layers."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gradcli", "check", path, "--json"], capture_output=True, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": time.perf_counter() - started, "timed_out": limit}
    seconds = time.perf_counter() - started
    row = {"seconds": seconds, "exit_code": done.returncode}
    try:
        model = json.loads(done.stdout)["result"]["models"][0]
        row["mode"] = model["mode"]
        row["failed_layers"] = [
            {"path": r["path"], "class": r["class_name"], "call": r["call_site"], "verdict": r["verdict"]}
            for r in model["layers"] if r["failed"]
        ]
        row["layer_calls"] = len(model["layers"])
        row["whole_model_failed"] = any(p["failed"] for p in model["pairs"])
        row["notes"] = model["notes"]
    except (ValueError, KeyError, IndexError, TypeError):
        row["stderr"] = done.stderr[-2000:]
    return row


def run_child(path: str, limit: int) -> dict:
    """Training step, load, layer pass and (stopped after ``limit`` s) the whole-model fast check."""
    command = [sys.executable, "-c", CHILD.format(root=ROOT), path, str(limit)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=KILL_AFTER * limit + KILL_MARGIN)
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as late:  # the fast check outlived its alarm: its last line stands
        stdout, stderr = late.stdout or "", late.stderr or ""
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": stderr[-2000:]}


#: The sizes child is killed this many times ``--limit`` (plus KILL_MARGIN s for the
#: step, loading, the layer pass and the joint check) after it started: the
#: alarm that stops the input-by-input check cannot interrupt one long
#: TensorFlow call (a ResNet-50's ran 870 s with a 120 s limit).
KILL_AFTER = 2
KILL_MARGIN = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["targets", "sizes", "both"], default="both")
    parser.add_argument("--only", nargs="*", help="targets or sizes to run (default: all)")
    parser.add_argument("--limit", type=int, default=600,
                        help="seconds after which a run (or the whole-model fast check) is stopped")
    args = parser.parse_args()
    document = {"machine": machine(), "targets": {}, "sizes": {}, "limit_seconds": args.limit}
    wanted = lambda name: not args.only or name in args.only  # noqa: E731
    with tempfile.TemporaryDirectory() as folder:
        files = {
            "resnet50_wrong": write(folder, "resnet50_wrong.py", RESNET.format(wrong=True)),
            "resnet50": write(folder, "resnet50.py", RESNET.format(wrong=False)),
            "transformer_1M_wrong": write(folder, "transformer_wrong.py", transformer("1M", wrong_block=2)),
            "transformer_1M": write(folder, "transformer.py", transformer("1M")),
            "transformer_5M_wrong": write(folder, "transformer_5M_wrong.py", transformer("5M", wrong_block=2)),
            "transformer_5M": write(folder, "transformer_5M.py", transformer("5M")),
        }
        if args.part in ("targets", "both"):
            for name, path in files.items():
                if not wanted(name):
                    continue
                row = run_cli(path, args.limit)
                row["training_step"] = run_child_step(path)
                row["training_steps"] = row["seconds"] / row["training_step"] if row["training_step"] else None
                row["load_average"] = [round(x, 2) for x in os.getloadavg()]
                document["targets"][name] = row
                print(name, json.dumps(row)[:600], flush=True)
        if args.part in ("sizes", "both"):
            paths = {size: write(folder, f"transformer_{size}.py", transformer(size)) for size in SIZES}
            paths["25M"] = files["resnet50"]
            for size, path in paths.items():
                if not wanted(size):
                    continue
                document["sizes"][size] = run_child(path, args.limit)
                document["sizes"][size]["load_average"] = [round(x, 2) for x in os.getloadavg()]
                print(size, json.dumps(document["sizes"][size])[:600], flush=True)
    print(write_results("layer_speed", document))


STEP = r"""
import os, statistics, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, {root!r})
import numpy as np
from gradcli.tf_import import import_tensorflow
tf = import_tensorflow()
import keras
from gradcli.model.loading import import_model_file
module = import_model_file(sys.argv[1])
net, data = module.model, module.inputs(np.random.default_rng(0))
loss_fn = keras.losses.get(module.loss)
x, y = tf.constant(data["x"]), tf.constant(data["y"])
def step():
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(loss_fn(y, net(x, training=False)))
    return tape.gradient(value, net.trainable_variables)
step()
times = []
for _ in range(5):
    t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
print(statistics.median(times))
"""


def run_child_step(path: str) -> float | None:
    """A training step of the model file's float32 model (median of 5 after a warm-up)."""
    done = subprocess.run(
        [sys.executable, "-c", STEP.format(root=ROOT), path], capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


if __name__ == "__main__":
    main()
