"""Where a path is cut inside code the model file calls: a library or a helper.

A cut (``sites.cut_sites``: ``tf.stop_gradient``, a round, a cast to an
integer) is made by some line of Python. ``TracedGraph.location`` names the
model file's line that led to it; when the op is made further in, by a
library (TensorFlow Probability) or by a helper module the model file
imports, the report also names that line: ``chain`` walks the op's creation
stack (``op.traceback``) and gives "OP at LIB:LINE, called from FILE:LINE"
(the nearest frame in another file), "from the model at MODEL:LINE".

Some cuts are no op at all. Eagerly, code can turn a tensor into numpy
(``tensor.numpy()``, ``np.asarray``, ``tf.get_static_value``: TensorFlow
Probability's ``prefer_static`` helpers do, whenever a value is known, which
it always is eagerly) and compute on in numpy: the result comes back as a
constant, and the tape loses the path there. ``tfb.Cumsum().inverse(y)``
computes ``y - shift(y)`` with the shift in numpy eagerly, so its reverse-mode
gradient is the identity where the derivative of ``y_i - y_{i-1}`` by
``y_{i-1}`` is -1; traced, no value is known and the graph's gradient is
right, so the traced graph shows no cut. ``numpy_cut_sites`` finds these
(``recorded.numpy_conversions``: a tensor that carries the input's derivative
on the tape, converted to numpy during an eager call under the tape) and
names each by the same chain, the conversion's line first.

Evidence, and when it is shown (``explain``): the sites are looked for on a
``zero`` or ``disconnected`` pair and on a failing ``mismatch`` some of whose
failing elements have an analytic value of exactly 0 where finite
differences do not (a path lost); the verdict stands (a zero gradient where
the derivative is not zero is wrong). A conversion is named only when the
tape shows the converted tensor carries the input (its gradient is not None):
converting a shape or a constant cuts nothing.
"""

from __future__ import annotations

import os

from gradcli.model.paths import relative_path
from gradcli.numerics.recorded import numpy_conversions
from gradcli.results import GraphSite
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()

#: TensorFlow's own code: a frame in it is the mechanism, not the caller that asked for it.
_TENSORFLOW_DIR = os.path.dirname(os.path.abspath(tf.__file__)) + os.sep
#: gradcli's own package folder: frames in it are the caller side of a model call.
_GRADCLI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: At most this many numpy cuts are named.
MAX_SITES = 5


def shown_path(filename: str) -> str:
    """A frame's file as a report shows it: below the working directory
    relative to it, inside an installed package from the package's folder
    (``tensorflow_probability/python/bijectors/cumsum.py``)."""
    path = os.path.abspath(filename)
    marker = os.sep + "site-packages" + os.sep
    if marker in path:
        return path.split(marker, 1)[1]
    return relative_path(path)


def _below_gradcli(frames) -> list:
    """The frames of a stack (outermost first) below gradcli's own call of the model."""
    frames = list(frames)
    ours = [i for i, f in enumerate(frames) if os.path.abspath(f.filename).startswith(_GRADCLI_DIR)]
    return frames[ours[-1] + 1:] if ours else frames


def chain(frames, model_path: str, known: str = "") -> tuple[str, str] | None:
    """(site, "called from ..." words) of a creation or conversion stack: the
    site is the innermost frame outside TensorFlow's own code; the words name
    the nearest outer frame in another file and, if it is not the model file's,
    the model file's innermost line (neither when it is ``known``, the line
    the report gives already). None when every frame is TensorFlow's or
    the site is the model file's own line (``TracedGraph.location`` names it)."""
    frames = _below_gradcli(frames)
    model_path = os.path.abspath(model_path) if model_path else ""
    outside = [i for i, f in enumerate(frames) if not os.path.abspath(f.filename).startswith(_TENSORFLOW_DIR)]
    if not outside:
        return None
    i = outside[-1]
    site = frames[i]
    if os.path.abspath(site.filename) == model_path:
        return None
    where = f"{shown_path(site.filename)}:{site.lineno}"
    words = []
    outer = [f for f in reversed(frames[:i]) if f.filename != site.filename
             and not os.path.abspath(f.filename).startswith(_TENSORFLOW_DIR)]
    # The caller: the nearest outer frame of the site's own package (a
    # decorator package's wrapper between them is no caller), else the nearest.
    caller = next((f for f in outer if _package(f.filename) == _package(site.filename)), outer[0] if outer else None)
    user = [f for f in frames[:i] if os.path.abspath(f.filename) == model_path]
    if caller is not None and f"{shown_path(caller.filename)}:{caller.lineno}" != known:
        words.append(f"called from {shown_path(caller.filename)}:{caller.lineno}")
    if user and user[-1] is not caller and f"{shown_path(user[-1].filename)}:{user[-1].lineno}" != known:
        words.append(f"from the model at {shown_path(user[-1].filename)}:{user[-1].lineno}")
    return where, ", ".join(words)


def _package(filename: str) -> str:
    """The installed package a file belongs to (its folder below
    site-packages), or "" for a file of the user's own."""
    path = os.path.abspath(filename)
    marker = os.sep + "site-packages" + os.sep
    return path.split(marker, 1)[1].split(os.sep, 1)[0] if marker in path else ""


def op_origin(graph, op) -> str:
    """" (made at LIB:LINE, called from ...)" for a cut op that a library or a
    helper made, else ""."""
    try:
        found = chain(op.traceback, graph.model.path, graph.location(op))
    except Exception:  # noqa: BLE001 - an op without a traceback: its model line is all there is
        return ""
    if found is None:
        return ""
    where, words = found
    return f" (made at {where}{', ' + words if words else ''})"


def numpy_cut_sites(model, name) -> list[GraphSite]:
    """The places where a call of ``model.function`` under a tape watching
    ``name`` turns a tensor carrying ``name``'s derivative into numpy (module
    docstring); one site per line, at most ``MAX_SITES``."""
    sites, seen = [], set()
    for conversion in numpy_conversions(model.function, model.point, name):
        found = chain(conversion.stack, model.path)
        if found is None:
            frames = _below_gradcli(conversion.stack)
            user = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(model.path)]
            if not user:
                continue
            found = (f"{shown_path(user[-1].filename)}:{user[-1].lineno}", "")
        where, words = found
        if where in seen:
            continue
        seen.add(where)
        line = _source_line(conversion.stack, where)
        description = (
            f"a conversion to numpy{f' ({line})' if line else ''}: the value of {name} leaves "
            f"TensorFlow and comes back as a constant"
        )
        sites.append(GraphSite(op_type="numpy", op_name=line or "numpy", location=where + (f", {words}" if words else ""),
                               description=description))
        if len(sites) == MAX_SITES:
            break
    return sites


def _source_line(stack, where: str) -> str:
    """The source text of the frame at ``where`` (``file:line``), stripped."""
    for frame in reversed(list(stack)):
        if f"{shown_path(frame.filename)}:{frame.lineno}" == where:
            return (getattr(frame, "line", "") or "").strip()
    return ""
