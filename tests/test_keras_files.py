""".keras files as people save them: a registered custom layer made known with
--import (a module of the project, or a .py file), a compiled model's
optimizer warning kept off stderr, and the compiled loss checked with respect
to the weights against a hand-written float64 gradient."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, error_line, gradcli

#: One worker runs this module: its module-scoped fixture is costly (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(__name__)

LAYERS = """\
import keras


@keras.saving.register_keras_serializable(package="project")
class Cube(keras.layers.Layer):
    \"\"\"w * x**3, elementwise.\"\"\"

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return self.w * x ** 3
"""

SAVE = """\
import keras
import numpy as np
from models.layers import Cube

rng = np.random.default_rng(7)
inputs = keras.Input((3,))
net = keras.Model(inputs, keras.layers.Dense(2, name="head")(Cube(name="cube")(inputs)))
weights = {"w": rng.uniform(0.5, 1.5, 3), "kernel": rng.normal(size=(3, 2)), "bias": rng.normal(size=2)}
net.set_weights([weights["w"], weights["kernel"], weights["bias"]])
net.compile(optimizer="adam", loss="mse")
net.optimizer.build(net.trainable_variables)  # its saved state then differs from a fresh one's
net.save("cube.keras")
x, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
np.savez("data.npz", x=x, y=y, **weights)
"""


def _run(*args, cwd):
    """gradcli in a new interpreter: Keras's class registry starts empty, and
    stderr is the process's own (nothing captures Python's warnings)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("GRADCLI_IN_PROCESS", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project whose models/layers.py registers a custom layer, and a
    compiled .keras model that uses it, saved by another process."""
    root = tmp_path_factory.mktemp("keras_project")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (root / "models").mkdir()
    (root / "models" / "layers.py").write_text(LAYERS)
    (root / "save.py").write_text(SAVE)
    done = _run("save.py", cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def _reference(data):
    """The compiled loss, mean((cube(x) K + b - y)^2) over every element, and
    its gradient by hand in float64, at the weights as the file keeps them
    (float32) and the data as given (float64)."""
    x, y = data["x"], data["y"]
    w, kernel, bias = (data[k].astype(np.float32).astype(np.float64) for k in ("w", "kernel", "bias"))
    cubed = w * x ** 3
    residual = cubed @ kernel + bias - y
    g = 2 * residual / residual.size  # dL/dpred
    return {
        "cube/w": (x ** 3 * (g @ kernel.T)).sum(axis=0),
        "head/kernel": cubed.T @ g,
        "head/bias": g.sum(axis=0),
        "x": 3 * w * x ** 2 * (g @ kernel.T),  # the data too, by default (not the targets y)
    }


def test_an_unregistered_custom_layer_says_how_to_import_it(project):
    done = _run("-m", "gradcli", "forward", "cube.keras", "--input", "x=@data.npz:x", cwd=project)
    assert done.returncode == 3, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cube.keras: cannot load the Keras model (safe mode) - "), done
    assert lines[0].endswith(
        "(a custom class the file needs is not registered in this process: use --import MODULE "
        "to import the module that registers it)"
    ), done


def test_compiled_loss_with_import_passes_and_stderr_stays_empty(project):
    done = _run("-m", "gradcli", "check", "cube.keras", "--import", "models.layers", "--loss", "compiled",
                "--input", "x=@data.npz:x", "--input", "y=@data.npz:y", "--mode", "full", cwd=project)
    assert done.returncode == 0, done
    assert done.stderr == "", done  # no optimizer-loading warning, no absl line
    assert "note: checking the compiled loss mean_squared_error(y, model(x))" in done.stdout, done


def test_compiled_loss_gradient_matches_the_hand_written_gradient(project, monkeypatch):
    monkeypatch.chdir(project)
    run = gradcli("vjp", "cube.keras", "--import", os.path.join("models", "layers.py"), "--loss", "compiled",
                  "--input", "x=@data.npz:x", "--input", "y=@data.npz:y", "--json")
    assert run.exit_code == 0, run
    result = run.result
    assert [s["name"] for s in result["seeds"]] == ["loss"]
    expected = _reference(np.load(project / "data.npz"))
    got = {g["name"]: np.asarray(g["values"]) for g in result["gradients"]}
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-14, err_msg=name)


def test_loss_errors_are_one_line(project, monkeypatch):
    monkeypatch.chdir(project)
    common = ("--import", "models.layers", "--input", "x=@data.npz:x")
    run = gradcli("forward", "cube.keras", *common, "--loss", "compiled")
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: --loss needs the targets as --input y=VALUE beside the model's data (given: x)"
    run = gradcli("forward", "cube.keras", *common, "--input", "y=@data.npz:y", "--loss", "hinge_of_doom")
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: --loss 'hinge_of_doom': neither 'compiled' nor a Keras loss name (mse, ...)"
    run = gradcli("forward", "cube.keras", "--import", "models.nothing", "--input", "x=@data.npz:x")
    assert run.exit_code == 2, run
    assert error_line(run) == (
        "Error: --import models.nothing: no module named 'models.nothing' (looked in . and the installed packages)"
    )
