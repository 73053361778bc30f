"""Renderers: each reads result objects and writes them; none computes anything.

``report(result)`` is the plain-text report of any result, as the command that
made it prints it: what ``str(result)`` returns (``gradcli.results.outcome``).
``TEXT`` is the one table of which renderer draws which result class; results
themselves name no renderer.
"""

from __future__ import annotations

#: Result class name -> "module:function" drawing it on a rich console, as
#: ``function(result, console)``: the renderer its command uses for text.
TEXT = {
    "CheckResult": "gradcli.render.text:render_check",
    "HessianResult": "gradcli.render.hessian_text:render_hessian",
    "LogdetResult": "gradcli.render.text:render_logdet",
    "ForwardResult": "gradcli.render.inspect_text:render_forward",
    "VjpResult": "gradcli.render.inspect_text:render_vjp",
    "JvpResult": "gradcli.render.inspect_text:render_jvp",
    "JacobianResult": "gradcli.render.inspect_text:render_jacobian",
}


def report(result) -> str:
    """The text report of ``result`` (plain text, no colour); ``repr`` for a
    result class no command renders."""
    import importlib

    from gradcli.render.formatting import plain_text

    spec = TEXT.get(type(result).__name__)
    if spec is None:
        return repr(result)
    module, _, function = spec.partition(":")
    render = getattr(importlib.import_module(module), function)
    return plain_text(lambda out: render(result, out))
