"""Exceptions raised while differentiating or evaluating the model, as one
line that says where: the model-file line and the op that raised, and while
differentiating the op whose gradient function raised."""

from __future__ import annotations

import os

from gradcli.errors import ModelError


def raised(exc: BaseException, model, analytic: bool, graph=None, forward: bool = False) -> ModelError:
    """A one-line ModelError for an exception raised while differentiating
    (``analytic``) or while evaluating the model near the point: the model-file
    line (the deepest frame in the file, else the first ``File "...", line N``
    of the model file in TensorFlow's message, which names the node's creation
    site for errors raised inside a traced graph) and the op that raised.

    While differentiating, the message also names the op whose gradient
    function raised (``ModelGraph.raising_gradient``: its type, name, what
    replaced its gradient, and the model-file line that created it), which is
    rarely the op that raised inside that function; with no model-file frame
    in the traceback, the line that leads the message is that op's.
    ``forward``: raised while taking a forward-mode product (JVP), which calls
    no gradient function: no search for one (on a large network the search
    tries the gradient of op after op, minutes for a message)."""
    import re
    import traceback

    from gradcli.model.core import first_line, where_raised
    from gradcli.model.paths import relative_path

    text = str(exc)
    op = getattr(getattr(exc, "op", None), "type", None)
    if op is None:
        found = re.search(r"\[Op:(\w+)\]", text) or re.search(r"node '?([\w/.-]+)", text)
        op = found.group(1).split("/")[-1] if found else None
    model_file = os.path.abspath(model.path)
    where = where_raised(exc, model.path)
    if not any(os.path.abspath(f.filename) == model_file for f in traceback.extract_tb(exc.__traceback__)):
        lines = [ln for f, ln in re.findall(r'File "([^"]+)", line (\d+)', text)
                 if os.path.abspath(f) == model_file]
        if lines:
            where = f"{relative_path(model.path)}:{lines[-1]}"
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", first_line(exc))
    message = re.sub(r"\s*\[Op:\w+\].*", "", message).strip().splitlines()
    doing = "computing the gradient" if analytic else "evaluating the model within a step of the point"
    if forward:
        doing = "computing forward mode (a JVP)"
    site = _raising_gradient(exc, model, graph) if analytic and not forward else None
    if site is not None:
        made = f", made at {site.location}" if site.location else ""
        op_name = f"op '{site.op_name}'" if site.op_name else "op"
        doing = f"computing the gradient of {op_name} ({site.description}{made})"
        if where == relative_path(model.path) and site.location:  # no line of its own
            where = site.location
    by = f" in op {op}" if op else ""
    return ModelError(
        f"{where}: {doing} raised {type(exc).__name__}{by}: {message[0] if message else ''}"
    )


def _raising_gradient(exc, model, graph):
    """``ModelGraph.raising_gradient``, tracing the model if no graph is given;
    None when that search itself fails (the message then names what it can)."""
    try:
        if graph is None:
            from gradcli.verdicts.culprit import ModelGraph

            graph = ModelGraph(model)
        return graph.raising_gradient(exc)
    except Exception:  # noqa: BLE001 - a bonus on an error message, never a second error
        return None
