"""Why a model's gradient fails in float64: the op whose own gradient raises, and where.

The loader (``model.dtype_choice``) finds that the reverse pass raises in
float64 but not in the model's own dtypes (a float32-only gradient kernel,
such as ScaleAndTranslateGrad behind ``tf.image.resize`` with lanczos or
antialiasing); this module words it for the note that says the model is
checked in its own dtype: ``Op 'name' at file:line: its gradient raised ...``.
The op is found by building each op's registered gradient in the traced
float64 graph (``culprit.ModelGraph``), in graph order; when that analysis
fails, TensorFlow's own message stays (the analysis is a bonus, never an error).
"""

from __future__ import annotations

import re

from gradcli.model.core import Model, first_line


def describe_gradient_failure(model: Model, exc: BaseException) -> str:
    """The forward op whose own gradient raises in float64, with its model-file
    line, found by building each op's gradient in the traced float64 graph
    (``verdicts.culprit.ModelGraph``); else the op TensorFlow's message names."""
    first = first_line(exc)
    first = re.sub(r"\s*\[Op:\w+\].*", "", first).strip()
    named = getattr(getattr(exc, "op", None), "type", None)
    if named is None:
        found = re.search(r"\[Op:(\w+)\]", str(exc))
        named = found.group(1) if found else None
    why = f"{type(exc).__name__}{f' in {named}' if named else ''}: {first}"
    try:
        site = failing_gradient_site(model)
    except Exception:  # graph analysis is a bonus: TensorFlow's own words stay
        site = None
    return f"{site}: its gradient raised {why}" if site else f"the gradient raised {why}"


def failing_gradient_site(model: Model) -> str | None:
    """``Op 'name' at file:line`` of the first op, in graph order, whose own
    registered gradient cannot be built at the model's (float64) point."""
    from gradcli.numerics.autodiff import graph_gradients
    from gradcli.verdicts.culprit import ModelGraph

    graph = ModelGraph(model)
    if not graph.trace():
        return None
    with graph.graph.as_default():
        for op in list(graph.graph.get_operations()):
            xs = [t for t in op.inputs if t.dtype.is_floating]
            ys = [t for t in op.outputs if t.dtype.is_floating]
            if not xs or not ys or op.type in ("Placeholder", "Const"):
                continue
            try:
                graph_gradients(ys, xs, stop_gradients=xs)
            except LookupError:  # no gradient at all: not a dtype problem
                continue
            except Exception:
                where = graph.location(op)
                return f"{op.type} '{op.name}'" + (f" at {where}" if where else "")
    return None
