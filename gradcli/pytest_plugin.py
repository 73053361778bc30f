"""``pytest --gradcli``: every model file is a test item.

Installed with gradcli (entry point ``pytest11``), inactive until ``--gradcli``
is given, so an ordinary test run neither imports TensorFlow nor changes::

    pytest --gradcli                            # models from [tool.gradcli] paths
    pytest --gradcli --gradcli-glob 'models/**/*.py'
    pytest --gradcli -n auto                    # pytest-xdist: models spread over cores

Which models: ``--gradcli-glob PATTERN`` (repeatable, relative to the rootdir;
``**`` recurses), else the ``paths`` of ``[tool.gradcli]`` (folders stand for
their ``*.py`` files, as for ``gradcli check``). Each model file becomes one
item, ``FILE.py::gradcli`` (``FILE.py::NAME`` for a ``FILE.py:NAME`` entry),
marked ``gradcli`` (``-m gradcli`` selects them, ``-m "not gradcli"`` leaves
them out). Options come from ``[tool.gradcli]`` and ``[tool.gradcli.check]``
and then the model file's own ``check`` dict, exactly as ``gradcli check``
without flags reads them. A failing item's report is the verdict table
``gradcli check`` prints; a model that cannot be loaded fails with its error.

Model folders outside the paths pytest was going to collect (``testpaths``)
are added when no paths were given on the command line; with explicit paths,
only model files below them are collected. (A model file named on the command
line is also imported by pytest as a test module; name its folder instead.) Each xdist worker imports
TensorFlow once and checks the models it is handed.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

MARKER = "gradcli"
#: config.stash key: {absolute model file: [spec, ...]} and the run's options.
MODELS = pytest.StashKey[dict]()
OPTIONS = pytest.StashKey[tuple]()


def pytest_addoption(parser):
    group = parser.getgroup("gradcli", "gradient checks of model files")
    group.addoption("--gradcli", action="store_true", help="Collect model files as test items (gradcli check).")
    group.addoption(
        "--gradcli-glob", action="append", default=[], metavar="PATTERN",
        help="Model files to collect (relative to the rootdir, ** recurses) instead of [tool.gradcli] paths.",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: a gradient check of a model file (pytest --gradcli)")
    if not config.getoption("gradcli"):
        return
    from gradcli.errors import GradcliError

    try:
        models, options = _configured(config)
    except GradcliError as exc:
        raise pytest.UsageError(f"gradcli: {exc}") from None
    config.stash[MODELS] = models
    config.stash[OPTIONS] = options
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths on the command line: make sure pytest walks the model files too.
        # Their folders, not the files: a file named on the command line is
        # imported as a test module whatever its name, which would run it twice.
        roots = [Path(a).resolve() for a in config.args]
        for folder in sorted({Path(path).parent for path in models}):
            if not any(_below(folder, root) for root in roots):
                config.args.append(str(folder))
                roots.append(folder)


def _configured(config) -> tuple[dict, tuple]:
    """The model files and ``(CheckOptions, fixed)`` as ``gradcli check`` would
    read them from ``[tool.gradcli]`` with no flags (no TensorFlow here)."""
    import click

    from gradcli.cli import cli
    from gradcli.cli.check import check, check_options
    from gradcli.cli.command import configured_params, flag_of
    from gradcli.config import option_fields
    from gradcli.errors import UsageError
    from gradcli.model.loading import split_spec
    from gradcli.model.paths import expand_models

    ctx = check.make_context("check", [], parent=click.Context(cli, info_name="gradcli"))
    params, given = configured_params(ctx)
    try:
        options = check_options(params)
    except UsageError as error:  # named as pyproject.toml spells it, as `gradcli check` does
        raise UsageError(error.message(lambda name: flag_of(ctx, name))) from None
    patterns = config.getoption("gradcli_glob")
    if patterns:
        root = str(config.rootpath)
        specs = sorted(
            os.path.join(root, match)
            for pattern in patterns
            for match in glob.glob(pattern, root_dir=root, recursive=True)
            if match.endswith(".py") and not os.path.basename(match).startswith(("_", "conftest"))
        )
        if not specs:
            raise pytest.UsageError(f"gradcli: --gradcli-glob {' '.join(patterns)} matches no *.py file below {root}")
    elif params["models"]:
        specs = expand_models(params["models"])
    else:
        raise pytest.UsageError("gradcli: --gradcli needs --gradcli-glob PATTERN or `paths` in [tool.gradcli]")
    models: dict[str, list[str]] = {}
    for spec in specs:
        path, _ = split_spec(spec)
        models.setdefault(os.path.abspath(path), []).append(spec)
    return models, (options, option_fields(given))


def _below(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def pytest_collect_file(file_path: Path, parent):
    models = parent.config.stash.get(MODELS, None)
    if models and str(file_path) in models:
        return ModelFile.from_parent(parent, path=file_path)
    return None


class ModelFile(pytest.File):
    def collect(self):
        for spec in self.config.stash[MODELS][str(self.path)]:
            name = split_name(spec) or MARKER
            item = ModelItem.from_parent(self, name=name, spec=spec)
            item.add_marker(MARKER)
            yield item


def split_name(spec: str) -> str | None:
    from gradcli.model.loading import split_spec

    return split_spec(spec)[1]


class GradientCheckFailed(Exception):
    """The report of a model that failed (or could not be checked)."""


class ModelItem(pytest.Item):
    def __init__(self, *, spec: str, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec

    def runtest(self):
        from gradcli.analyses.check import check_spec  # imports TensorFlow
        from gradcli.render.text import model_verdict, plain_text, render_check
        from gradcli.results import CheckResult

        options, fixed = self.config.stash[OPTIONS]
        model = check_spec(self.spec, options, fixed)
        if not model.ok:  # first line: what pytest's short summary shows
            result = CheckResult(models=[model])
            report = plain_text(lambda out: render_check(result, out))
            raise GradientCheckFailed(f"gradcli check: {model_verdict(model)}\n{report}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GradientCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        from gradcli.model.paths import relative_path

        return self.path, None, f"gradcli check {relative_path(self.spec)}"
