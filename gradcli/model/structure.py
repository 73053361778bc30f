"""Nested values: a model function's arguments and outputs flattened to named leaves.

A model function may take nested values, as jax's pytrees: ``inputs =
{"params": {"w": ..., "b": ...}, "x": ...}`` for ``def model(params, x)``, and
return them (``{"loss": l, "parts": {"p": p}}``). Every analysis sees a
``Model``, a function of a flat dict of named arrays; this module is the
translation, done once at load time, so every command works unchanged.

Naming rule: a leaf is named by its path, parts joined by ``.``: dict keys by
name (``params.w``), list and tuple items by index (``pair.0``). The same rule
names nested outputs (``parts.p``); a top-level tuple's outputs stay ``0``,
``1``, ... as before.

What nests: a dict always; a list or tuple when it holds an array, a tensor, a
dict, a sparse tensor or a nested value (``(w, b)``). A list of Python numbers
(``[1.0, 2.0]``, ``[[1, 2], [3, 4]]``) stays one array, as it always was.

Sparse inputs: a ``tf.SparseTensor`` is differentiated through its stored
values, as torch's gradcheck does for sparse inputs: its one leaf is
``NAME.values`` (``x.values``), its indices and dense shape are fixed at the
point, and the user's function receives a ``tf.SparseTensor`` rebuilt from the
values it is given. A perturbation then moves a stored value and never the
sparsity pattern, which finite differences could not follow.

Sparse outputs: a ``tf.SparseTensor`` output is compared in its dense form
(``tf.sparse.to_dense``): its gradient with respect to the stored values is the
dense form's on those elements, and the dense form keeps one shape when a
perturbation changes which values are stored (``tf.sparse.from_dense`` of a
value crossing zero), where the values alone would change length.

Complex inputs: a complex array is two real leaves, ``NAME.real`` and
``NAME.imag``, and the user's function receives ``tf.complex(real, imag)``.
Finite differences then move each part alone, and reverse mode through
``tf.complex`` hands each part its share of TensorFlow's gradient, whose
convention for a real loss f of z = x + iy is df/dx + i df/dy: the real part
of the gradient is checked against df/dx, the imaginary part against df/dy. A
custom gradient that returns the conjugate (df/dx - i df/dy, the other common
convention) fails on the imaginary part.

Complex outputs (``split_complex_outputs``, for the analyses that
differentiate: check, vjp, jvp, jacobian, hessian; ``forward`` shows them as
they are): an output y is two real outputs, ``y.real`` and ``y.imag``,
``tf.math.real`` and ``tf.math.imag`` of it. Reverse mode through them hands
the model's own gradient functions TensorFlow's complex cotangent for a
real loss <c_re, Re y> + <c_im, Im y>, namely c_re + i c_im, and its result is
checked against finite differences of both parts: a custom rule that misses
a conjugate fails. No output is skipped for being complex.

The user's function always receives its arguments rebuilt (``Structure.rebuild``):
the same dicts (keys in the order given), lists, tuples and sparse tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gradcli.errors import ModelError

#: Joins the parts of a leaf's path (``params.w``); weights use ``/`` (``dense/kernel``).
SEP = "."


@dataclass(frozen=True)
class Leaf:
    name: str


@dataclass(frozen=True)
class Node:
    """A dict (``keys`` its keys as given), list or tuple (``keys`` None) of children."""

    kind: type
    keys: tuple | None
    children: tuple


@dataclass(frozen=True)
class Sparse:
    """A ``tf.SparseTensor`` whose stored values are the leaf ``name``."""

    name: str
    indices: np.ndarray
    dense_shape: tuple


@dataclass(frozen=True)
class Complex:
    """A complex array held as two real leaves, its real and imaginary parts."""

    real: str
    imag: str


@dataclass
class Structure:
    """How the model function's arguments nest: top-level name -> tree of leaves."""

    top: dict[str, Any]
    #: sparse inputs: ``NAME`` -> its values leaf (``x`` -> ``x.values``)
    sparse: dict[str, str] = field(default_factory=dict)
    #: complex inputs: ``NAME`` -> its two real leaves (``z`` -> ``z.real``, ``z.imag``)
    complex: dict[str, tuple] = field(default_factory=dict)
    #: leaves the model file wrote as Python numbers (``values`` reads them as float64)
    python_numbers: list[str] = field(default_factory=list)
    #: outputs that came back sparse, compared in their dense form (set by ``flatten_outputs``)
    sparse_outputs: set = field(default_factory=set)

    @property
    def names(self) -> list[str]:
        """The model function's own argument names."""
        return list(self.top)

    @property
    def nested(self) -> bool:
        return any(not isinstance(node, Leaf) for node in self.top.values())

    def rebuild(self, flat: dict) -> dict:
        """The function's arguments (by top-level name) from a flat dict of leaves.
        Names not in the structure (weights added by ``model.variables``) pass as they are."""
        known = set()
        for node in self.top.values():
            known.update(_leaves(node))
        result = {name: _rebuild(node, flat) for name, node in self.top.items()}
        result.update({n: v for n, v in flat.items() if n not in known and n not in result})
        return result

    def leaves_under(self, name: str) -> list[str]:
        """The leaves a nested input ``name`` (``params``, ``params.inner``) holds; [] for a leaf."""
        prefix = name + SEP
        return [leaf for node in self.top.values() for leaf in _leaves(node) if leaf.startswith(prefix)]

    def notes(self, point: dict, wrt) -> list[str]:
        """What a sparse input or output means for the check: one note each."""
        inputs = [
            f"{name} is sparse: differentiated through its {np.size(point[leaf])} stored values "
            f"({leaf}), indices fixed"
            for name, leaf in self.sparse.items() if leaf in wrt
        ]
        inputs += [
            f"{name} is complex: checked as its real and imaginary parts ({real}, {imag}), "
            "TensorFlow's convention: the gradient of a real loss f is df/dx + i df/dy"
            for name, (real, imag) in self.complex.items() if real in wrt or imag in wrt
        ]
        outputs = [
            f"output {name} is sparse: compared in its dense form (tf.sparse.to_dense)"
            for name in sorted(self.sparse_outputs)
        ]
        return inputs + outputs


def flat_structure(names) -> Structure:
    """The structure of arguments that do not nest: each its own leaf."""
    return Structure(top={n: Leaf(n) for n in names})


def flatten_inputs(raw: dict, to_array: Callable[[Any, str], np.ndarray], site: str) -> tuple[dict, Structure]:
    """``raw`` (top-level name -> value, possibly nested) as ``(leaves, structure)``.

    ``to_array(value, name)`` turns one leaf into an array (and refuses what is
    not numeric, naming the leaf by its path). Two paths that spell the same
    name (a key ``"a.b"`` beside ``{"a": {"b": ...}}``) are a ModelError at
    ``site``, where the model file defines ``inputs``."""
    flat: dict[str, np.ndarray] = {}
    structure = Structure(top={})

    def walk(value, name: str):
        if isinstance(value, dict):
            keys = tuple(value)
            return Node(dict, keys, tuple(walk(value[k], f"{name}{SEP}{k}") for k in keys))
        if isinstance(value, (list, tuple)) and nests(value):
            return Node(type(value), None, tuple(walk(v, f"{name}{SEP}{i}") for i, v in enumerate(value)))
        if _is_sparse(value):
            leaf = f"{name}{SEP}values"
            add(leaf, to_array(value.values, leaf), value.values)
            structure.sparse[name] = leaf
            return Sparse(leaf, np.asarray(value.indices), tuple(int(d) for d in np.asarray(value.dense_shape)))
        parts = _complex_parts(value)
        if parts is not None:
            real, imag = f"{name}{SEP}real", f"{name}{SEP}imag"
            add(real, parts[0], parts[0])
            add(imag, parts[1], parts[1])
            structure.complex[name] = (real, imag)
            return Complex(real, imag)
        add(name, to_array(value, name), value)
        return Leaf(name)

    def add(name: str, array: np.ndarray, given) -> None:
        if name in flat:
            raise ModelError(f"{site}: input {name!r} is named twice by the nesting of `inputs`; rename a key")
        flat[name] = array
        if isinstance(given, (list, tuple, float)) and np.issubdtype(array.dtype, np.floating):
            structure.python_numbers.append(name)

    for key, value in raw.items():
        structure.top[str(key)] = walk(value, str(key))
    return flat, structure


def nests(value) -> bool:
    """Whether a list or tuple is a nested value rather than one array (module docstring)."""
    return any(
        isinstance(v, dict) or _is_sparse(v)
        or ((hasattr(v, "shape") or hasattr(v, "numpy")) and not isinstance(v, np.generic))  # numpy scalars are numbers
        or (isinstance(v, (list, tuple)) and nests(v))
        for v in value
    )


def _complex_parts(value) -> tuple[np.ndarray, np.ndarray] | None:
    """The real and imaginary parts of a complex array or tensor, else None."""
    try:
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    except (ValueError, TypeError):  # ragged, or not an array: ``to_array`` says what it is
        return None
    if array.dtype.kind != "c":
        return None
    return np.ascontiguousarray(array.real), np.ascontiguousarray(array.imag)


def _is_sparse(value) -> bool:
    return type(value).__name__ in ("SparseTensor", "SparseTensorValue") and hasattr(value, "indices")


def _leaves(node) -> list[str]:
    if isinstance(node, Leaf):
        return [node.name]
    if isinstance(node, Complex):
        return [node.real, node.imag]
    if isinstance(node, Sparse):
        return [node.name]
    return [leaf for child in node.children for leaf in _leaves(child)]


def _rebuild(node, flat: dict):
    if isinstance(node, Leaf):
        return flat[node.name]
    if isinstance(node, (Sparse, Complex)):
        from gradcli.tf_import import import_tensorflow

        tf = import_tensorflow()
        if isinstance(node, Complex):
            return tf.complex(flat[node.real], flat[node.imag])
        return tf.SparseTensor(node.indices, flat[node.name], node.dense_shape)
    children = [_rebuild(child, flat) for child in node.children]
    if node.kind is dict:
        return dict(zip(node.keys, children))
    return node.kind(children)


def flatten_outputs(
    items: dict, convert: Callable[[Any, str], Any], site: str, sparse_outputs: set | None = None
) -> dict:
    """Named outputs with nested ones flattened to their paths (``parts.p``).

    ``items`` maps the top-level output names to what the function returned
    under them; ``convert(value, name)`` turns one leaf into a tensor (and
    refuses what is not one). A sparse output becomes its dense form, and its
    name is added to ``sparse_outputs`` (module docstring)."""
    flat: dict = {}

    def walk(value, name: str):
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, f"{name}{SEP}{k}")
        elif isinstance(value, (list, tuple)) and value and nests(value):
            for i, v in enumerate(value):
                walk(v, f"{name}{SEP}{i}")
        else:
            if name in flat:
                raise ModelError(f"{site}: output {name!r} is named twice by the nesting of the outputs; rename a key")
            if _is_sparse(value) and type(value).__name__ == "SparseTensor":
                from gradcli.tf_import import import_tensorflow

                value = import_tensorflow().sparse.to_dense(value)
                if sparse_outputs is not None:
                    sparse_outputs.add(name)
            flat[name] = convert(value, name)

    for name, value in items.items():
        walk(value, name)
    return flat


def split_complex_outputs(model) -> None:
    """Each complex output of ``model`` as two real outputs, ``NAME.real`` and
    ``NAME.imag`` (module docstring), in place: its function, outputs and own
    call, with a note. Nothing happens for a model without complex outputs."""
    complex_names = [o for o, v in model.outputs.items() if np.iscomplexobj(np.asarray(v))]
    if not complex_names or getattr(model, "complex_outputs_split", False):
        return
    from gradcli.tf_import import import_tensorflow

    tf = import_tensorflow()

    def split(outputs: dict) -> dict:
        flat = {}
        for name, value in outputs.items():
            if name in complex_names:
                flat[f"{name}{SEP}real"] = tf.math.real(value)
                flat[f"{name}{SEP}imag"] = tf.math.imag(value)
            else:
                flat[name] = value
        return flat

    function = model.function

    def split_function(values: dict) -> dict:
        return split(function(values))

    split_function.__dict__.update(getattr(function, "__dict__", {}))  # e.g. ``variables``
    model.function = split_function
    model.outputs = {
        part: array
        for name, value in model.outputs.items()
        for part, array in (
            [(f"{name}{SEP}real", np.real(value)), (f"{name}{SEP}imag", np.imag(value))]
            if name in complex_names else [(name, value)]
        )
    }
    own = model.own_call
    if own is not None:
        call = own.call
        own.call = lambda data: split(call(data))
    model.taken_vjp = None  # taken with the complex outputs left out
    model.complex_outputs_split = True
    model.notes.append(
        f"output{'s' if len(complex_names) > 1 else ''} {', '.join(complex_names)} "
        f"{'are' if len(complex_names) > 1 else 'is'} complex: checked as real and imaginary parts "
        f"({', '.join(f'{n}{SEP}real, {n}{SEP}imag' for n in complex_names)}); reverse mode hands the "
        "model's gradient functions TensorFlow's complex cotangent c_re + i c_im"
    )
