"""Facts about one op of a traced graph, read from the op alone.

What kind of op it is for gradients (``CUT_OPS``: no gradient flows through
it; ``SURROGATE_OPS``: a straight-through gradient by design; ``TRIVIAL_OPS``:
it only moves data), whether it is a ``tf.custom_gradient`` (TensorFlow makes
one an ``IdentityN`` whose registered gradient closes over the user's
function: ``custom_result_count``, ``custom_gradient_function``), whether a
``gradient_override_map`` replaced its gradient (``override``), where the
code that computes its gradient is (``gradient_definition``: the line of the
decorated function's ``def``, found by parsing the source), and what to call
it in a report (``describe``). No model and no graph-wide search here: the
traced graph (``graph.TracedGraph``) and the rules built on it use these.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from gradcli.model.paths import relative_path

#: Ops whose gradient is None (or zero) although their output is floating.
CUT_OPS = {
    "StopGradient": "tf.stop_gradient",
    "PreventGradient": "tf.stop_gradient",
    "Round": "tf.round",
    "Rint": "tf.math.rint",
    "Floor": "tf.floor",
    "Ceil": "tf.math.ceil",
    "Sign": "tf.sign (zero gradient)",
}
#: Straight-through gradient ops: their gradient is a surrogate by design.
SURROGATE_OPS = (
    "FakeQuantWithMinMaxArgs",
    "FakeQuantWithMinMaxVars",
    "FakeQuantWithMinMaxVarsPerChannel",
    "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV3",
    "QuantizeAndDequantizeV4",
)
#: Ops that only move data around: their gradients are not worth a check.
TRIVIAL_OPS = {"Placeholder", "Const", "Identity", "NoOp", "ReadVariableOp", "Shape", "Size", "Rank"}


def floating(t) -> bool:
    return t.dtype.is_floating


def carries(t) -> bool:
    """Whether ``t`` can carry a differentiated value: a floating or complex
    tensor (``tf.complex`` of a real value, an FFT of it, and ``tf.math.real``
    of that carry it on as a real tensor does)."""
    return t.dtype.is_floating or t.dtype.is_complex


def precision_dtype(dtype) -> str:
    """The floating dtype whose rounding a tensor of ``dtype`` has: its own, or
    the dtype of the parts of a complex one (complex64 rounds as float32,
    complex128 as float64)."""
    return dtype.real_dtype.name


def cut_description(op) -> str:
    """What cuts the gradient at ``op`` (``CUT_OPS``, a cast to an integer or
    bool, an op with floating or complex inputs and no such output), else ""."""
    if op.type in CUT_OPS:
        return CUT_OPS[op.type]
    if op.type == "Cast":
        dst = op.get_attr("DstT")
        if not dst.is_floating and not dst.is_complex:
            return f"a cast to {dst.name} (tf.cast)"
        return ""
    carrying_in = any(carries(t) for t in op.inputs)
    if carrying_in and op.outputs and not any(carries(t) for t in op.outputs):
        return f"{op.type} (integer or bool output)"
    return ""


def ancestors(ops, control: bool = False) -> set:
    """``ops`` and every op they read from (and wait for, with ``control``)."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        if control:
            stack.extend(op.control_inputs)
    return seen


# -- tf.custom_gradient ----------------------------------------------------------


def custom_result_count(op) -> int | None:
    """For a ``tf.custom_gradient`` IdentityN: how many of its tensors are results."""
    if op.type != "IdentityN":
        return None
    grad_fn = _custom_grad_fn(op)
    if grad_fn is None:
        return None
    cells = _closure(grad_fn)
    return cells.get("flat_result_len")


def custom_gradient_function(op):
    """The user's function decorated with ``tf.custom_gradient`` that ``op``
    stands for (its code names the decorated function), else None."""
    return _closure(_custom_grad_fn(op) or (lambda: None)).get("grad_fn")


def decorated_function(registered):
    """The function decorated with ``tf.custom_gradient`` behind a gradient
    function of TensorFlow's registry (``registered``), else None (an
    override's registered function is its own)."""
    return _closure(_closure(registered).get("tape_grad_fn") or (lambda: None)).get("grad_fn")


def _custom_grad_fn(op):
    from tensorflow.python.framework import ops as tf_ops

    try:
        registered = tf_ops.get_gradient_function(op)
    except Exception:
        return None
    if registered is None:
        return None
    inner = _closure(registered).get("tape_grad_fn")
    return inner


def _closure(fn) -> dict:
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    cells = {}
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    return cells


def custom_definition(op) -> str:
    """``file:line`` of the ``def`` of the function decorated with ``tf.custom_gradient``."""
    code = getattr(custom_gradient_function(op), "__code__", None)
    if code is None:
        return ""
    line = enclosing_def(code.co_filename, code.co_firstlineno) or code.co_firstlineno
    return f"{relative_path(code.co_filename)}:{line}"


def custom_argument_names(op) -> list[str]:
    """The parameter names of the function decorated with ``tf.custom_gradient``."""
    user_grad = custom_gradient_function(op)
    code = getattr(user_grad, "__code__", None)
    tree = parsed(code.co_filename) if code is not None else None
    line = enclosing_def(code.co_filename, code.co_firstlineno) if tree is not None else None
    for node in ast.walk(tree) if line else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def describe(op) -> str:
    """The op's type, or ``tf.custom_gradient NAME`` (the function that defines ``grad``)."""
    if custom_result_count(op) is not None:
        qual = getattr(custom_gradient_function(op), "__qualname__", "")
        parts = qual.split(".<locals>.")
        owner = parts[-2] if len(parts) > 1 else qual  # the function that defines grad
        return f"tf.custom_gradient {owner}".strip()
    return op.type


# -- gradient_override_map -------------------------------------------------------


def override(op):
    """``(registered name, "function at file:line")`` when ``op``'s gradient is
    not its type's: a ``gradient_override_map`` set ``_gradient_op_type`` (a
    ``tf.custom_gradient`` does too, and is reported as itself), else None."""
    from tensorflow.python.framework import ops as tf_ops

    if custom_result_count(op) is not None:
        return None
    try:
        name = op.get_attr("_gradient_op_type")
    except (ValueError, TypeError):
        return None
    name = name.decode() if isinstance(name, bytes) else str(name)
    if not name or name == op.type:
        return None
    try:
        function = tf_ops.gradient_registry.lookup(name)
    except LookupError:
        return name, ""
    return name, _function_text(function)


def _function_text(function) -> str:
    """``qualname at file:line`` of a Python function, else its name."""
    code = getattr(function, "__code__", None)
    qual = getattr(function, "__qualname__", "") or getattr(function, "__name__", "")
    if code is None:
        return qual
    return f"{qual} at {relative_path(code.co_filename)}:{code.co_firstlineno}"


def gradient_definition(op) -> str:
    """``file:line`` of the code that computes ``op``'s gradient when the user
    wrote it: a ``tf.custom_gradient``'s decorated function, or the Python
    function registered for a ``gradient_override_map``; else ""."""
    custom = custom_definition(op)
    if custom:
        return custom
    found = override(op)
    if found is None or " at " not in found[1]:
        return ""
    return found[1].rsplit(" at ", 1)[1]


# -- the source around a line ----------------------------------------------------


@lru_cache(maxsize=32)
def parsed(path):
    """The parsed module at ``path`` (cached), or None when it cannot be read."""
    try:
        with open(path) as handle:
            return ast.parse(handle.read())
    except (OSError, SyntaxError):
        return None


@lru_cache(maxsize=256)
def enclosing_def(path: str, line: int) -> int | None:
    """The line of the innermost function around ``line`` decorated with a
    ``custom_gradient`` (else the innermost function enclosing it). Cached as
    ``parsed`` is: a walk of the whole module each time cost a warm check of a
    custom gradient a fifth of its time."""
    tree = parsed(path)
    if tree is None:
        return None
    best, best_decorated = None, None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno < line <= (
            node.end_lineno or node.lineno
        ):
            decorated = any("custom_gradient" in ast.unparse(d) for d in node.decorator_list)
            if decorated and (best_decorated is None or node.lineno > best_decorated):
                best_decorated = node.lineno
            if best is None or node.lineno > best:
                best = node.lineno
    return best_decorated or best


def enclosing_class(path: str, line: int) -> str:
    """``Class.method`` when ``line`` is inside a method of a class (the
    innermost class and the method of it that encloses the line), else ""."""
    tree = parsed(path)
    if tree is None:
        return ""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    item.lineno <= line <= (item.end_lineno or item.lineno)
                ):
                    if best is None or node.lineno > best[0]:
                        best = (node.lineno, f"{node.name}.{item.name}")
    return best[1] if best else ""
