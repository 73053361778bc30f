"""`gradcli check FOLDER` in a real repository: the project root is importable,
helper modules beside the models are skipped with a note, hidden folders,
virtual environments and what .gitignore ignores are left out, --include and
--exclude (and their [tool.gradcli] keys) choose files, and a missing folder
is named as a folder."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from conftest import error_line, gradcli

NET = """\
import numpy as np
from models.layers import cube

def model(x):
    return cube(x) * {scale}

inputs = {{"x": np.array([0.5, -1.5, 2.0])}}
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A project: pyproject.toml, .git, .gitignore, and models/ holding two
    model files that import a helper module through the project root, the
    helper itself, a test file, git-ignored files, and folders never walked."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (root / ".gitignore").write_text("# scratch work\nscratch_*.py\n/models/attic/\n!scratch_keep.py\n")
    models = root / "models"
    (models / "deep").mkdir(parents=True)
    (models / "layers.py").write_text("def cube(x):\n    return x * x * x\n")
    (models / "test_layers.py").write_text("from models.layers import cube\n\ndef test_cube():\n    assert cube(2) == 8\n")
    (models / "net.py").write_text(NET.format(scale=2.0))
    (models / "deep" / "wide.py").write_text(NET.format(scale=-3.0))
    (models / "scratch_try.py").write_text("raise SystemExit('git ignores me')\n")
    (models / "scratch_keep.py").write_text(NET.format(scale=1.0))  # re-included by '!'
    for never in ("attic", ".hidden", ".venv", "venv", "node_modules", "__pycache__", "build", "env"):
        (models / never).mkdir()
        (models / never / "bad.py").write_text("raise SystemExit('never walked')\nmodel = 1\n")
    (models / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv by any name
    monkeypatch.chdir(root)
    return root


def test_folder_skips_helpers_and_ignored_files_and_imports_through_the_root(repo):
    path_before, modules_before = list(sys.path), set(sys.modules)
    run = gradcli("check", "models/", "--json", "--mode", "full")
    assert run.exit_code == 0, run
    models = run.result["models"]
    assert [m["name"] for m in models] == [
        os.path.join("models", "deep", "wide.py"), os.path.join("models", "net.py"),
        os.path.join("models", "scratch_keep.py"),
    ]
    assert run.stderr.splitlines() == [
        "note: skipped 3 files: 2 define no `model`, 1 excluded by .gitignore"
    ], run
    # The project root was importable during the import, and only then.
    assert sys.path == path_before
    assert not {"models", "models.layers"} & (set(sys.modules) - modules_before)
    # The helper's code ran: d/dx (s x^3) = 3 s x^2, element by element.
    x = np.array([0.5, -1.5, 2.0])
    assert all(pair["verdict"] == "pass" for model in models for pair in model["pairs"])
    run = gradcli("jacobian", "models/deep/wide.py", "--json")
    assert run.exit_code == 0, run
    (block,) = run.result["blocks"]
    largest = {tuple(e["input_index"]): e["value"] for e in block["largest"]}
    for i, value in largest.items():
        assert value == pytest.approx(3 * -3.0 * x[i[0]] ** 2, rel=1e-12)


def test_the_note_lists_each_skipped_file_with_v_and_nothing_with_q(repo):
    from gradcli.model.paths import collect_models

    found = collect_models(["models"])
    assert found.note == "skipped 3 files: 2 define no `model`, 1 excluded by .gitignore"
    assert [(os.path.basename(p), why[0]) for p, why in found.skipped] == [
        ("layers.py", "defines no `model`"), ("scratch_try.py", "excluded by .gitignore"),
        ("test_layers.py", "defines no `model`"),
    ]
    quiet = gradcli("check", "models/", "--include", "net.py", "-q", "--json")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet
    verbose = gradcli("check", "models/", "--include", "net.py", "-v", "--json")
    assert verbose.exit_code == 0, verbose
    assert verbose.stderr.splitlines() == [
        "note: skipped 5 files: 1 excluded by .gitignore, 4 match no include pattern",
        *(f"note: skipped {os.path.join('models', name)}: {why}" for name, why in [
            (os.path.join("deep", "wide.py"), "matches no include pattern"),
            ("layers.py", "matches no include pattern"),
            ("scratch_keep.py", "matches no include pattern"),
            ("scratch_try.py", "excluded by .gitignore"),
            ("test_layers.py", "matches no include pattern"),
        ]),
    ], verbose


def test_include_and_exclude_follow_gits_glob_rules(repo):
    from gradcli.model.paths import collect_models, patterns

    here = str(repo)

    def names(include=(), exclude=()):
        found = collect_models(["models"], include=patterns(include, here), exclude=patterns(exclude, here))
        return [os.path.relpath(p, "models") for p in found.specs]

    every = [os.path.join("deep", "wide.py"), "net.py", "scratch_keep.py"]
    assert names() == every
    assert names(exclude=["deep/"]) == ["net.py", "scratch_keep.py"]  # a name at any depth, folders only
    assert names(exclude=["/deep"]) == every  # anchored at the working folder: no ./deep
    assert names(exclude=["models/deep"]) == ["net.py", "scratch_keep.py"]
    assert names(exclude=["**/w*.py"]) == ["net.py", "scratch_keep.py"]
    assert names(exclude=["*.py", "!net.py"]) == ["net.py"]
    assert names(include=["models/deep/"]) == [os.path.join("deep", "wide.py")]  # a folder includes its files
    assert names(include=["n?t.py", "scratch_[jk]*"]) == ["net.py", "scratch_keep.py"]
    assert names(include=["*.py"], exclude=["net.py"]) == [os.path.join("deep", "wide.py"), "scratch_keep.py"]


def test_configured_globs_are_relative_to_the_pyproject(repo, monkeypatch):
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.gradcli]\npaths = ["models"]\nexclude = ["models/deep/", "scratch_*"]\n'
    )
    monkeypatch.chdir(repo / "models")  # the globs stay anchored at the project
    run = gradcli("check", "--json")
    assert run.exit_code == 0, run
    assert [os.path.basename(m["name"]) for m in run.result["models"]] == ["net.py"]
    assert run.stderr.splitlines() == [  # deep/ is never walked; git's rules come first
        "note: skipped 4 files: 2 define no `model`, 1 excluded by .gitignore, 1 matches an exclude pattern"
    ], run
    # The command line replaces the configured list.
    run = gradcli("check", "--json", "--exclude", "net.py", "--include", "scratch_keep.py")
    assert [os.path.basename(m["name"]) for m in run.result["models"]] == ["scratch_keep.py"], run


def test_a_named_file_without_model_is_still_an_error(repo):
    run = gradcli("check", "models/layers.py")
    assert run.exit_code == 3, run
    assert error_line(run) == (
        f"Error: {os.path.join('models', 'layers.py')}: defines no `model` (a model file must set "
        "`model` to a callable or a Keras model)"
    )


def test_a_missing_folder_is_named_as_a_folder(repo):
    for spelled in ("nowhere/", "nowhere"):
        run = gradcli("check", spelled)
        assert run.exit_code == 2, run
        assert error_line(run) == f"Error: no such folder: {spelled}"
    run = gradcli("check", "nowhere.py")
    assert error_line(run) == "Error: no such model file: nowhere.py"


def test_a_folder_of_helpers_only_is_a_usage_error_that_says_why(repo):
    (repo / "helpers").mkdir()
    (repo / "helpers" / "util.py").write_text("def f(x):\n    return x\n")
    run = gradcli("check", "helpers")
    assert run.exit_code == 2, run
    assert error_line(run) == "Error: no *.py model files in folder helpers (skipped 1 file: 1 defines no `model`)"


def test_reading_decides_what_defines_model_and_undecidable_files_are_loaded(tmp_path):
    from gradcli.model.paths import defines_model

    cases = {
        "model = build()": True,
        "def model(x):\n    return x": True,
        "from .nets import resnet as model": True,
        "if FAST:\n    model = small\nelse:\n    model = big": True,
        "a, model = 1, 2": True,
        "with open(p) as model:\n    pass": True,
        "from helpers import *": True,  # cannot tell: loaded
        "globals()['model'] = f": True,  # cannot tell: loaded
        "def broken(:": True,  # the loader reports the syntax error
        "def f(model):\n    return model": False,
        "class Net:\n    model = 1": False,
        "def g():\n    model = 1\n    return model": False,
        "model: object": False,  # declared, never bound
        "import numpy as np\nX = np.ones(3)": False,
    }
    for number, (source, expected) in enumerate(cases.items()):
        path = tmp_path / f"case{number}.py"
        path.write_text(source + "\n")
        assert defines_model(str(path)) is expected, source


def test_a_model_file_in_a_package_imports_its_neighbours_relatively(monkeypatch):
    """tests/models/pkg_relative holds __init__.py, and net.py does
    ``from ._layers import softclip`` (y = 2 tanh(x)): named as a file, as its
    folder, and as ``.`` from inside it, the file is imported as
    ``pkg_relative.net`` and checked (it stopped with "attempted relative
    import with no known parent package"). The analytic gradient is
    2 (1 - tanh(x)^2) at x = [0.5, -1]."""
    from conftest import FIXTURES

    package = FIXTURES / "pkg_relative"
    expected = 2 * (1 - np.tanh(np.array([0.5, -1.0])) ** 2)
    for folder, spelled in ((FIXTURES.parent.parent, str(package / "net.py")),
                            (FIXTURES.parent.parent, str(package)), (package, ".")):
        monkeypatch.chdir(folder)
        run = gradcli("check", spelled, "--json")
        assert run.exit_code == 0, run
        (model,) = run.result["models"]
        assert model["error"] is None and model["name"].endswith("net.py")
        (pair,) = model["pairs"]
        assert pair["verdict"] == "pass"
        assert any(pair["worst"]["analytic"] == pytest.approx(e, rel=1e-9) for e in expected), pair
    assert "pkg_relative" not in sys.modules and "pkg_relative.net" not in sys.modules


def test_a_namespace_package_imported_from_elsewhere_is_set_aside_whole(tmp_path, monkeypatch):
    """``shared/models/helper.py`` (folders without ``__init__.py``: namespace
    packages) imported from one folder, then a model checked in another folder
    that holds a ``shared`` folder of its own: both packages are set aside for
    the import and come back after it. Setting ``shared`` aside before asking
    about ``shared.models`` (whose path Python computes from its parent's
    entry in sys.modules) stopped the check with "internal error: KeyError:
    'shared'" (a test suite importing ``tests.models.x``, then checking a model
    of a project with a ``tests`` folder). The model is y = 3 x: gradient 3."""
    elsewhere, project = tmp_path / "elsewhere", tmp_path / "project"
    (elsewhere / "shared" / "models").mkdir(parents=True)
    (elsewhere / "shared" / "models" / "helper.py").write_text("SCALE = 1.0\n")
    (project / "shared").mkdir(parents=True)
    (project / "shared" / "scale.py").write_text("SCALE = 3.0\n")
    (project / "model.py").write_text(
        "import numpy as np\nfrom shared.scale import SCALE\n\n\n"
        "def model(x):\n    return SCALE * x\n\n\n"
        "def inputs(rng):\n    return {'x': np.array([0.5, -1.0])}\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    for name in [n for n in sys.modules if n == "shared" or n.startswith("shared.")]:
        monkeypatch.delitem(sys.modules, name)
    import shared.models.helper  # noqa: F401 - the package imported from elsewhere

    before = {n: sys.modules[n] for n in ("shared", "shared.models", "shared.models.helper")}
    run = gradcli("check", str(project / "model.py"), "--json")
    assert run.exit_code == 0, run
    (pair,) = run.result["models"][0]["pairs"]
    assert pair["verdict"] == "pass" and pair["worst"]["analytic"] == pytest.approx(3.0, rel=1e-12), pair
    assert all(sys.modules.get(n) is module for n, module in before.items())
    assert "shared.scale" not in sys.modules
    for name in before:
        monkeypatch.delitem(sys.modules, name)
