"""The units of the layer pass and what names them: ``LayerCall`` (one
captured call of a unit), ``layer_units`` (which layers are units: every
layer that is not a model, found by descending through models), a unit's mode
(``unit_mode``: full up to ``FULL_ELEMENTS`` differentiated elements), and the
Keras objects behind a loaded model (``keras_root``, ``runner_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.model.core import numbered

#: Full check of a unit up to this many differentiated elements: its first pass
#: is one traced batch of 2 n evaluations (``check.JOINT_LIMIT``).
FULL_ELEMENTS = 2048
#: The one output of a unit's local function: <c, layer output>.
PROJECTED = "output_dot_c"


@dataclass
class LayerCall:
    """One captured call of a unit: the clone's layer (float64), the user's
    layer, and what the call received and returned."""

    layer: object
    own: object | None
    path: str
    index: int
    args: tuple
    kwargs: dict
    trainable: list
    non_trainable: list
    outputs: object
    calls: int = 1
    order: int = 0  # position among the captured calls (seeds its cotangent)
    names: list = field(default_factory=list)  # weight names, in trainable_variables order
    tree: object = None  # the ``ModuleTree`` of a tf.Module unit
    policies: bool = False  # computed in float64 by switching dtype policies (``keras_float64``)
    seconds: float = 0.0  # the call's eager seconds in the shape pass (``plan``'s estimate)
    emitted: list = field(default_factory=list)  # shapes of the Keras masks it emits (``capture.emitted_shapes``)
    input_masks: list = field(default_factory=list)  # per argument leaf, its Keras mask (``capture.input_masks``)


def layer_units(root) -> dict[int, str]:
    """id -> path of every unit under ``root`` (the package docstring): descend
    through models, stop at the first layer that is not one. Paths are unique."""
    import keras

    units, stack, seen = {}, [(root, root.name)], set()
    while stack:
        layer, path = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        for sub in layer._flatten_layers(include_self=False, recursive=False):
            if isinstance(sub, keras.layers.InputLayer):
                continue
            where = f"{path}/{sub.name}"
            if isinstance(sub, keras.Model):
                stack.append((sub, where))
            elif id(sub) not in units:
                units[id(sub)] = where
    # Two layers of one name under one parent (keras-hub's T5 has them) are two
    # units: numbered as weights that share a path are (``core.numbered``).
    return dict(zip(units, numbered(list(units.values()))))


def unit_mode(elements: int, output_elements: int = 1) -> str:
    """``full`` or ``fast`` for a unit's local function (the package docstring)."""
    return "full" if elements <= FULL_ELEMENTS and output_elements == 1 else "fast"


@dataclass(frozen=True)
class ShapeOnly:
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def floating_tensor(value) -> bool:
    dtype = getattr(value, "dtype", None)
    if dtype is None or not hasattr(value, "shape"):
        return False
    try:
        return np.issubdtype(np.dtype(getattr(dtype, "as_numpy_dtype", dtype)), np.floating)
    except TypeError:
        return False


def point_tensors(model, values: dict):
    """``values`` as tensors of the call's own (``autodiff.fresh``)."""
    from gradcli.numerics.autodiff import fresh

    return fresh(values)


def module_roots(model) -> list:
    """The model file's module-level ``tf.Module`` objects, for a model that
    is a function of them (not Keras): the roots of ``ModuleTree``."""
    import tensorflow as tf

    if model.kind != "function" or model.module is None:
        return []
    roots: dict = {}
    for name, obj in vars(model.module).items():
        if not name.startswith("_") and isinstance(obj, tf.Module):
            roots.setdefault(id(obj), obj)
    return list(roots.values())


def keras_root(model):
    """The user's Keras model object behind ``model``: the layer whose trainable
    variables are the own call's (``model.keras.keras_model``). The object the
    own call closes over (the model checked) comes first: a file may keep
    another layer with the same variables beside it (a backbone in a
    module-level variable, and ``model`` a wrapper adding no weights of its
    own, as ``GPT2CausalLM(backbone=backbone)``), whose layers the checked
    function does not call as such. The file's module-level objects are the
    fallback."""
    import keras

    own = getattr(model, "own_call", None)
    if own is None:
        return None
    wanted = {id(v) for v in own.variables.values()}
    candidates = list(closure_values(own.call))
    candidates += list(vars(model.module).values()) if model.module is not None else []
    for candidate in candidates:
        if isinstance(candidate, keras.layers.Layer) and candidate.built and (
            {id(v) for v in candidate.trainable_variables} == wanted
        ):
            return candidate
    return None


def closure_values(function, depth: int = 0) -> list:
    """Values a function closes over, a few closures deep (an own call wraps
    the Keras model in a lambda, a loss wraps that lambda)."""
    found = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        found.append(value)
        if callable(value) and depth < 3:
            found += closure_values(value, depth + 1)
    return found


def runner_of(model):
    """The Keras object ``Model.function`` calls: the float64 clone when the
    check runs in float64, else the user's model."""
    runner = _runner_root(model)
    return runner if runner is not None else keras_root(model)


def _runner_root(model):
    import keras

    root = keras_root(model)
    if root is None or str(model.dtype) != "float64" or not model.runs_in_float64:
        return None
    for value in closure_values(model.function):
        if isinstance(value, keras.Model) and value is not root and len(value.trainable_variables) == len(
            root.trainable_variables
        ):
            return value
    return None
