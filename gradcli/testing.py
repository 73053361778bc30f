"""Gradient checks inside a test suite, without a subprocess.

    from gradcli.testing import assert_gradients_ok

    def test_my_op():
        assert_gradients_ok(my_op, inputs={"x": [0.5, 1.5]})

    def test_model_files():
        assert_gradients_ok("models/")        # every model file in the folder

The AssertionError's message is the report ``gradcli check`` prints (plain
text), so pytest shows which input, output and element is wrong.

Model files (a path, a folder, a list of them) run where ``gradcli check``
runs them: in a supervised worker process (``gradcli.workers.batch``), never
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
    """``gradcli.check(model, inputs, **options)``, model files each in a
    supervised worker (``isolate=True``); raises AssertionError with the report
    unless every check passed. Returns the result when it did.

    The frames of this module are hidden from pytest's traceback
    (``__tracebackhide__``): a failure shows the test's line and the report."""
    __tracebackhide__ = True
    import gradcli
    from gradcli.render.text import plain_text, render_check

    options.setdefault("isolate", _model_files(model))
    result = gradcli.check(model, inputs, **options)
    if not result.ok:
        report = plain_text(lambda out: render_check(result, out, quiet=True))
        raise AssertionError("gradient check failed\n" + report)
    return result


def _model_files(model) -> bool:
    paths = model if isinstance(model, (list, tuple)) else [model]
    return bool(paths) and all(isinstance(p, (str, bytes)) or hasattr(p, "__fspath__") for p in paths)
