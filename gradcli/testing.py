"""Gradient checks inside a test suite, without a subprocess.

    from gradcli.testing import assert_gradients_ok

    def test_my_op():
        assert_gradients_ok(my_op, inputs={"x": [0.5, 1.5]})

    def test_model_files():
        assert_gradients_ok("models/")        # every model file in the folder

The AssertionError's message is the report ``gradcli check`` prints (plain
text), so pytest shows which input, output and element is wrong.

To run every model file of a project as its own test item instead, without
writing a test for each, use the pytest plugin installed with gradcli:
``pytest --gradcli`` (``gradcli.pytest_plugin``; docs: ci-and-pytest).
"""

from __future__ import annotations

from gradcli.results import CheckResult


def assert_gradients_ok(model, **options) -> CheckResult:
    """``gradcli.check(model, **options)``; raises AssertionError with the report
    unless every check passed. Returns the result when it did."""
    import gradcli
    from gradcli.render.text import plain_text, render_check

    result = gradcli.check(model, **options)
    if not result.ok:
        report = plain_text(lambda out: render_check(result, out, quiet=True))
        raise AssertionError("gradient check failed\n" + report)
    return result
