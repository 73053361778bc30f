"""Gradient checks inside a test suite, without a subprocess.

    from gradcli.testing import assert_gradients_ok

    def test_my_op():
        assert_gradients_ok(my_op, inputs={"x": [0.5, 1.5]})

    def test_model_files():
        assert_gradients_ok("models/")        # every model file in the folder

The AssertionError's message is the report ``gradcli check`` prints (plain
text), so pytest shows which input, output and element is wrong.

Model files (a path, a folder, a list of them) run where ``gradcli check``
runs them: in a supervised worker process (``gradcli.analyses.batch``), never
in the test's own, so one that ends its process (``os._exit(0)``) is an error
in the report, not the end of the test run. A callable or Keras model is
checked in the test's process: it is already there.

To run every model file of a project as its own test item instead, without
writing a test for each, use the pytest plugin installed with gradcli:
``pytest --gradcli`` (``gradcli.pytest_plugin``; docs: ci-and-pytest).
"""

from __future__ import annotations

import os

from gradcli.results import CheckResult


def assert_gradients_ok(model, inputs=None, **options) -> CheckResult:
    """``gradcli.check(model, inputs, **options)``; raises AssertionError with
    the report unless every check passed. Returns the result when it did.

    The frames of this module are hidden from pytest's traceback
    (``__tracebackhide__``): a failure shows the test's line and the report."""
    __tracebackhide__ = True
    from gradcli.render.text import plain_text, render_check

    if _model_files(model):
        result = _check_files(model, {**options, **({} if inputs is None else {"inputs": inputs})})
    else:
        import gradcli

        result = gradcli.check(model, inputs, **options)
    if not result.ok:
        report = plain_text(lambda out: render_check(result, out, quiet=True))
        raise AssertionError("gradient check failed\n" + report)
    return result


def _model_files(model) -> bool:
    paths = model if isinstance(model, (list, tuple)) else [model]
    return bool(paths) and all(isinstance(p, (str, bytes)) or hasattr(p, "__fspath__") for p in paths)


def _check_files(model, options: dict) -> CheckResult:
    """What ``gradcli.check`` does with model files (the same keywords, the same
    errors), each checked in a supervised worker."""
    __tracebackhide__ = True
    from gradcli import _CHECK_RUN, _build, _existing, _keywords, _raise_usage
    from gradcli.workers.batch import check_batch
    from gradcli.errors import UsageError
    from gradcli.model.paths import expand_models
    from gradcli.options import CheckOptions

    run = {key: options.pop(key) for key in ("fail_fast", "jobs", "progress") if key in options}
    if options.pop("inputs", None) is not None:
        raise UsageError("gradcli.check(): inputs= is for a model object; a model file defines its own")
    fields, used = _keywords("check", options, CheckOptions, _CHECK_RUN)
    checked = _build(CheckOptions, fields, used)
    paths = model if isinstance(model, (list, tuple)) else [model]
    specs = expand_models([_existing(os.fsdecode(p)) for p in paths])
    return _raise_usage(check_batch(specs, checked, fixed=set(fields), isolate=True, **run))
