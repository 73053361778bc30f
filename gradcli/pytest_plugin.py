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
without flags reads them, from the file ``gradcli check`` would read in the
folder pytest was started in (``gradcli.config``: the first pyproject.toml
upwards, never above the repository root), and never above pytest's rootdir;
``--gradcli-config FILE`` names the file instead. A failing item's report is
the verdict table ``gradcli check`` prints; a model that cannot be loaded
fails with its error.

Model files run where ``gradcli check`` runs them: in a supervised worker
process (``gradcli.workers.batch.supervise``), never in pytest's own, whatever
``GRADCLI_IN_PROCESS`` says. A model that ends its process (``os._exit(0)``, a
segfault) fails its own item with "the model ended the process (...)" and the
test run goes on with a fresh worker. The worker is kept from one model item
to the next (it imports TensorFlow once), as in a ``gradcli check`` batch, and
runs a model only when its item runs, so ``-x``, ``-k`` and xdist's scheduling
waste no work; an item out of the expected order starts a new worker.

Model folders outside the paths pytest was going to collect (``testpaths``)
are added when no paths were given on the command line; with explicit paths,
only model files below them are collected. A model file is never imported by
pytest itself, even when its name is ``test_*.py`` or it is named on the
command line: only its gradcli item is collected from it.
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
#: Spells a parameter as the user sets it (the flag, or the pyproject.toml key).
SPELL = pytest.StashKey[object]()
RUNNER = pytest.StashKey["_Runner"]()


def pytest_addoption(parser):
    group = parser.getgroup("gradcli", "gradient checks of model files")
    group.addoption("--gradcli", action="store_true", help="Collect model files as test items (gradcli check).")
    group.addoption(
        "--gradcli-glob", action="append", default=[], metavar="PATTERN",
        help="Model files to collect (relative to the rootdir, ** recurses) instead of [tool.gradcli] paths.",
    )
    group.addoption(
        "--gradcli-config", metavar="FILE", default=None,
        help="Read gradcli settings from FILE (as gradcli --config) instead of the nearest pyproject.toml.",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: a gradient check of a model file (pytest --gradcli)")
    if not config.getoption("gradcli"):
        return
    from gradcli.errors import GradcliError

    try:
        models, options, spell = _configured(config)
    except GradcliError as exc:
        raise pytest.UsageError(f"gradcli: {exc}") from None
    config.stash[MODELS] = models
    config.stash[OPTIONS] = options
    config.stash[SPELL] = spell
    config.stash[RUNNER] = runner = _Runner()
    config.add_cleanup(runner.close)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths on the command line: make sure pytest walks the model files too.
        # Their folders, not the files: a file named on the command line is
        # imported as a test module whatever its name, which would run it twice.
        roots = [Path(a).resolve() for a in config.args]
        for folder in sorted({Path(path).parent for path in models}):
            if not any(_below(folder, root) for root in roots):
                config.args.append(str(folder))
                roots.append(folder)


def _configured(config) -> tuple[dict, tuple, object]:
    """The model files, ``(CheckOptions, fixed)`` and how to spell a parameter,
    as ``gradcli check`` would read them from ``[tool.gradcli]`` with no flags
    (no TensorFlow here)."""
    from gradcli.cli import cli
    from gradcli.cli.check import check_options
    from gradcli.cli.settings import settings_without_flags
    from gradcli.errors import UsageError
    from gradcli.model.loading import split_spec
    from gradcli.model.paths import expand_models

    root, start = config.rootpath, config.invocation_params.dir
    params, given, spell = settings_without_flags(cli, "check", {
        "start": str(start if _below(start, root) else root), "stop": str(root),
        "config_file": config.getoption("gradcli_config"),
    })
    try:
        options = check_options(params)
    except UsageError as error:  # named as pyproject.toml spells it, as `gradcli check` does
        raise UsageError(error.message(spell)) from None
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
    return models, (options, set(given)), spell


def _below(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent):
    """A model file's collector is its ``ModelFile`` alone: a ``Module`` (or
    ``DoctestModule``) that another plugin made for it (a ``test_*.py`` name, a
    file named on the command line) would import it in pytest's process."""
    collectors = yield
    models = parent.config.stash.get(MODELS, None)
    if models and str(file_path) in models:
        collectors = [c for c in collectors if not isinstance(c, pytest.Module)]
        collectors.append(ModelFile.from_parent(parent, path=file_path))
    return collectors


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


class GradientCheckWarning(UserWarning):
    """A model that passed with a verdict worth a look (zero, disconnected,
    kink): pytest lists it in its warnings summary, ``-W error`` fails on it."""


#: TensorFlow's internal graph text in an error message: ``[[{{node gradients/...}}]]``,
#: ``Detected at node '...' defined at (most recent call last):`` and the stack
#: that follows it, ``[Op:Mul] name:``. It names gradcli's traced graph, not
#: the user's code, so a failure message leaves it out.
_GRAPH_TEXT = (
    r"\s*\[\[\{\{node [^}]*\}\}\]\]",
    r"Detected at node [^\n]*(\n[ \t]+[^\n]*)*\n?",
    r"\s*\[Op:[A-Za-z0-9_]+\]( name: [^\s;]*)?",
    r"Graph execution error:\s*",
)


def without_graph_text(message: str) -> str:
    """``message`` without TensorFlow's node and op text (``_GRAPH_TEXT``)."""
    import re

    for pattern in _GRAPH_TEXT:
        message = re.sub(pattern, "", message)
    return re.sub(r"\n{3,}", "\n\n", message).strip()


class ModelItem(pytest.Item):
    def __init__(self, *, spec: str, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec

    def runtest(self):
        from gradcli.render.text import model_verdict, plain_text, render_check
        from gradcli.results import CheckResult

        from gradcli.errors import spell_texts

        model = spell_texts(self.config.stash[RUNNER].check(self), self.config.stash[SPELL])
        if not model.ok:  # first line: what pytest's short summary shows
            if model.error is not None:  # the model's path as pytest shows it
                from gradcli.model.paths import relative_path

                error = model.error.replace(self.spec, relative_path(self.spec), 1)
                raise GradientCheckFailed(without_graph_text(f"gradcli check: error: {error}"))
            result = CheckResult(models=[model])
            report = plain_text(lambda out: render_check(result, out))
            raise GradientCheckFailed(without_graph_text(f"gradcli check: {model_verdict(model)}\n{report}"))
        import warnings

        from gradcli.results import PASS

        for pair in model.pairs:  # passed, but not with a plain pass
            if pair.verdict != PASS:
                warnings.warn(GradientCheckWarning(
                    f"gradcli check {self.spec}: {pair.verdict} {pair.input} -> {pair.output}: "
                    f"{pair.explanation}"
                ))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GradientCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        from gradcli.model.paths import relative_path

        return self.path, None, f"gradcli check {relative_path(self.spec)}"


class _Runner:
    """Checks model items in a supervised worker process, kept between items.

    ``check(item)`` answers from a stream of the session's model items from
    that item on: the stream ``check_batch`` reads (``supervised``), which
    sends a model to the worker only when its answer is asked for, so items
    that do not run (``-x``, ``-k``) cost nothing. An item that is not the
    stream's next one (xdist hands each of its workers part of the items)
    closes the stream and starts one from itself; the end of the session
    closes the last.
    """

    def __init__(self):
        self.items: list = []
        self.outcomes = None

    def check(self, item: ModelItem):
        from gradcli.workers.batch import supervised

        if not self.items or self.items[0] is not item:
            self.close()
            items = [i for i in item.session.items if isinstance(i, ModelItem)]
            self.items = items[items.index(item):] if item in items else [item]
            options, fixed = item.config.stash[OPTIONS]
            self.outcomes = supervised([i.spec for i in self.items], options, fixed, 1)
        self.items.pop(0)
        try:
            return next(self.outcomes)
        except BaseException:  # --debug re-raises gradcli's own error; Ctrl-C
            self.close()
            raise

    def close(self) -> None:
        """End the worker (the end of the session, or a new stream)."""
        if self.outcomes is not None:
            self.outcomes.close()
        self.items, self.outcomes = [], None
