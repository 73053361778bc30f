"""Variables of a model file's own objects as inputs of a plain callable.

A ``model`` function that uses Keras layers, ``tf.Module`` objects or
``tf.Variable`` objects defined at the top of the model file hides their
weights: it takes only the data. Here those weights become inputs, named by
path, so the ``wrt`` option can name them (``dense/kernel``) and finite differences, the
analytic side and the culprit search all see them like any input:

* Keras layers and models at module level: their trainable variables, named
  like a Keras model's weights (``dense/kernel``);
* ``tf.Module`` objects: their trainable variables, named
  ``<module name>/<attribute path>`` (``linear/w``, ``linear/inner/scale``);
* ``tf.Variable`` objects: named by their global name (``w``).

One variable object is one weight wherever it is held (tied weights), and the
names are made all different by the one naming rule, ``core.weight_names``
(docs/model-files.md, "Weight names").

The function is made pure in them without ever assigning a variable: Keras
variables read the values given inside a ``keras.StatelessScope``; the
``tf.Variable`` attributes (and globals) are replaced by the given tensors for
the duration of the call and restored afterwards. ``tf.function`` wrappers of
the model function and of the modules' methods are bypassed during the call
(their traces captured the variables themselves). Whether each weight is
really reached through the substitution is verified once at load time: a
weight the model reads some other way (a ``tf.function`` defined elsewhere
captured it) is left as it is, not an input (``Model.unvaried``), and a
``wrt`` that asks for it is refused with a ``ModelError`` instead of showing
a zero gradient; a check of the other inputs goes on.

Keras layers cast their inputs and weights to their own dtype (float32 unless
built otherwise). When the check promotes the weights to float64, the layers'
dtype policies are set to float64 for the duration of the call (and restored),
so a float32 layer is checked in float64 like a Keras ``model`` (which is
cloned in float64 instead); ``native_dtype=True`` keeps float32.
"""

from __future__ import annotations

import contextlib
from collections import deque
from types import ModuleType

import numpy as np

from gradcli.errors import ModelError
from gradcli.model.core import call_model, code_site, weight_name, weight_names, where_raised
from gradcli.tf_import import import_tensorflow


def variables_by_path(root, aliases: dict | None = None) -> dict:
    """Every variable reachable from ``root`` (tracked attributes, breadth first):
    id -> (shortest attribute path, parent, key in parent, variable); ``aliases``
    as ``objects_by_path`` fills it."""
    return objects_by_path(root, import_tensorflow().Variable, aliases)


def objects_by_path(root, wanted, aliases: dict | None = None) -> dict:
    """Every object of type ``wanted`` reachable from ``root`` through tracked
    attributes (breadth first, below variables no further): id -> (shortest
    attribute path, parent, key in parent, object). ``aliases`` (when given)
    gets id -> [(parent, key), ...] for every other place an object found is
    held (tied weights: one variable at two attributes)."""
    tf = import_tensorflow()

    found, seen = {}, {id(root)}
    queue = deque([(root, "")])
    while queue:
        obj, prefix = queue.popleft()
        try:
            children = tf.train.TrackableView(obj).children(obj)
        except Exception:  # not trackable: nothing below it
            continue
        for name, child in children.items():
            if id(child) in seen:
                if aliases is not None and id(child) in found:
                    aliases.setdefault(id(child), []).append((obj, name))
                continue
            seen.add(id(child))
            path = f"{prefix}/{name}" if prefix else str(name)
            if isinstance(child, wanted):
                found[id(child)] = (path, obj, name, child)
            if not isinstance(child, tf.Variable):
                queue.append((child, path))
    return found


class _Weights:
    """The weights found in one model file, and how to substitute them."""

    def __init__(self):
        self.keras = {}  # name -> keras.Variable
        self.slots = {}  # name -> (parent, key, tf.Variable): replaced by a tensor in a call
        self.aliases = {}  # name -> [(parent, key), ...]: the same variable's other places
        self.classes = []  # classes of modules whose tf.function methods are bypassed
        self.layers = []  # the Keras layers holding ``keras``, and their sublayers

    @property
    def names(self) -> list[str]:
        return list(self.keras) + list(self.slots)

    def drop(self, names) -> None:
        """Substitute the weights ``names`` no more: they keep their own values."""
        for name in names:
            self.keras.pop(name, None)
            self.slots.pop(name, None)
            self.aliases.pop(name, None)

    def only(self, names) -> "_Weights":
        """The same substitution for the ``tf.Module`` and ``tf.Variable``
        weights ``names`` alone (the layer pass's local function of one module)."""
        subset = _Weights()
        subset.slots = {n: self.slots[n] for n in names}
        subset.aliases = {n: self.aliases[n] for n in names if n in self.aliases}
        subset.classes = self.classes
        return subset

    @contextlib.contextmanager
    def substituted(self, values: dict):
        import keras

        saved = []
        try:
            for name, (parent, key, _) in self.slots.items():
                for place, at in [(parent, key), *self.aliases.get(name, ())]:
                    saved.append((place, at, _get(place, at)))
                    _set(place, at, values[name])
            for cls, attribute, plain in self.bypassed():
                saved.append((cls, attribute, cls.__dict__[attribute]))
                setattr(cls, attribute, plain)
            given = {n: import_tensorflow().as_dtype(values[n].dtype).name for n in self.keras}
            wider = {given[n] for n, v in self.keras.items() if given[n] != v.dtype}
            for layer in self.layers if wider else ():
                saved.append((layer, "dtype_policy", layer.dtype_policy))
                layer.dtype_policy = max(wider)  # one dtype: the check promotes all alike
            scope = keras.StatelessScope(state_mapping=[(v, values[n]) for n, v in self.keras.items()])
            # The scope casts each value to its variable's dtype; values promoted
            # to float64 (layers switched to float64 above) must stay float64.
            scope.state_mapping.update({id(v): values[n] for n, v in self.keras.items()})
            with scope:
                yield
        finally:
            for parent, key, original in reversed(saved):
                _set(parent, key, original)

    def bypassed(self):
        for cls in self.classes:
            for attribute, value in list(vars(cls).items()):
                plain = getattr(value, "python_function", None)
                if plain is not None:
                    yield cls, attribute, plain


def _container(parent) -> bool:
    """Lists and dicts (and TensorFlow's tracking wrappers of them) hold weights by key."""
    return isinstance(parent, (list, dict)) or type(parent).__name__ in ("ListWrapper", "_DictWrapper")


def _key(parent, key):
    return int(key) if isinstance(parent, list) or type(parent).__name__ == "ListWrapper" else key


def _get(parent, key):
    return parent[_key(parent, key)] if _container(parent) else getattr(parent, key)


def _set(parent, key, value):
    if _container(parent):
        parent[_key(parent, key)] = value
    else:
        setattr(parent, key, value)


def _module_name(module, global_name: str) -> str:
    """A ``tf.Module``'s name; the name the file gives it where the module has
    none (a subclass whose ``__init__`` skips ``super().__init__()``: TensorFlow
    still tracks its variables, and its ``name`` raises AttributeError)."""
    try:
        return module.name
    except AttributeError:
        return global_name


def find_weights(module: ModuleType) -> _Weights:
    """Trainable variables of the file's module-level Keras layers, tf.Modules
    and tf.Variables, one weight per variable object, named as the module
    docstring says and made all different by ``core.weight_names``. A variable
    held at several places (tied weights: two attributes, two modules, a
    module and a global) is one weight, substituted at every place."""
    import keras

    tf = import_tensorflow()
    weights = _Weights()
    found = {}  # id -> [path, short name, variable, places: [(parent, key)]; none for Keras]
    for global_name, obj in list(vars(module).items()):
        if global_name.startswith("_") or isinstance(obj, (ModuleType, type)):
            continue
        if isinstance(obj, keras.layers.Layer):
            weights.layers += list(obj._flatten_layers(include_self=True))
            for v in obj.trainable_variables:
                found.setdefault(id(v), [v.path, weight_name(v.path), v, []])
        elif isinstance(obj, tf.Module):
            # Every module below it, containers too: a tf.function method of any
            # of them would have captured the variables its trace read.
            for sub in [obj] + [m for _, _, _, m in objects_by_path(obj, tf.Module).values()]:
                weights.classes += [c for c in type(sub).__mro__ if c.__module__ == module.__name__]
            aliases: dict = {}
            for path, parent, key, v in variables_by_path(obj, aliases).values():
                if v.trainable:
                    name = f"{_module_name(obj, global_name)}/{path}"
                    found.setdefault(id(v), [name, name, v, []])[3].extend([(parent, key), *aliases.get(id(v), ())])
        elif isinstance(obj, tf.Variable) and obj.trainable:
            found.setdefault(id(obj), [global_name, global_name, obj, []])[3].append((module, global_name))
    entries = list(found.values())
    for name, (_, _, v, places) in zip(weight_names([e[0] for e in entries], [e[1] for e in entries]), entries):
        if not places:
            weights.keras[name] = v
            continue
        weights.slots[name] = (*places[0], v)
        if places[1:]:
            weights.aliases[name] = places[1:]
    weights.classes = list(dict.fromkeys(weights.classes))
    weights.layers = list({id(layer): layer for layer in weights.layers}.values())
    return weights


def call(target, values: dict, path: str = "", structure=None) -> dict:
    """The user's function on named tensors (the leaves of ``structure``, when
    its arguments nest), outputs named and checked, errors located in ``path``
    (``core.call_model``)."""
    return call_model(target, values, code_site(target) or "the model", path, structure=structure)


def expose_weights(model, module: ModuleType, target) -> None:
    """Add the weights of ``module``'s objects to ``model`` as inputs (in place).

    Keras layers built by the first call are built here, with the point's data.
    A weight the model reads in a way the substitution cannot reach
    (``_unreached``) is left as it is, not an input, and listed in
    ``Model.unvaried``: ``point.choose_wrt`` refuses it when ``wrt`` asks for it
    (the default asks for every weight), and a check of the other inputs goes on.
    """
    data = dict(model.point)
    if _unbuilt_keras(module):
        _build(model, target, data)
    weights = find_weights(module)
    if not weights.names:
        return
    plain = getattr(target, "python_function", target)  # a tf.function's trace captured the variables
    function, own_variables = model.function, model.own_call.variables if model.own_call is not None else None
    _substitute(model, weights, plain, data)
    lost = _unreached(model, weights, target, data)
    if not lost:
        return
    model.unvaried = lost
    weights.drop(lost)
    if weights.names:
        _substitute(model, weights, plain, data)
    else:  # nothing left to substitute: the model as it was
        model.function, model.weights, model.point = function, [], data
        if model.own_call is not None:
            model.own_call.variables = own_variables


def _substitute(model, weights: _Weights, plain, data: dict) -> None:
    """``model`` as a function of ``weights`` (substituted in each call) and ``data``."""
    data_names = list(data)

    def function(values: dict) -> dict:
        with weights.substituted(values):
            return call(plain, {n: values[n] for n in data_names}, model.path, model.structure)

    # The seam differentiates these as variables (numerics.autodiff.sources_of).
    function.variables = frozenset(weights.names)
    point = {n: np.asarray(v.numpy()) for n, v in weights.keras.items()}
    point.update({n: np.asarray(v.numpy()) for n, (_, _, v) in weights.slots.items()})
    model.function, model.weights = function, weights.names
    if model.own_call is not None:  # the user's call reads the variables themselves
        model.own_call.variables = {
            **{n: v for n, v in weights.keras.items()},
            **{n: v for n, (_, _, v) in weights.slots.items()},
        }
    model.point = {**point, **data}


def _unbuilt_keras(module) -> bool:
    import keras

    return any(
        isinstance(obj, keras.layers.Layer) and not obj.built for obj in vars(module).values()
    )


def _build(model, target, data) -> None:
    tf = import_tensorflow()
    try:
        call(target, {n: tf.convert_to_tensor(v) for n, v in data.items()}, model.path, model.structure)
    except ModelError:  # already located (call_model)
        raise
    except Exception as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        if lines and lines[0] == "in user code:":  # a tf.function's error ends with the cause
            lines = lines[-1:]
        raise ModelError(
            f"{where_raised(exc, model.path)}: building the model's layers raised "
            f"{type(exc).__name__}: {lines[0] if lines else ''}"
        ) from None


def _unreached(model, weights: _Weights, target, data) -> list[str]:
    """The weights the model's outputs depend on (by a tape over the variables
    themselves) that the substituted inputs do not reach: substituting them
    would silently change nothing."""
    from gradcli.numerics.autodiff import fresh, reverse

    tf = import_tensorflow()

    def total(outputs):
        floats = [tf.reduce_sum(tf.cast(t, tf.float64)) for t in outputs.values() if t.dtype.is_floating]
        return tf.add_n(floats) if floats else tf.constant(0.0, tf.float64)

    from gradcli.numerics.held import tensors_of
    tensors = tensors_of(model.point)
    variables = list(weights.keras.values()) + [v for _, _, v in weights.slots.values()]
    try:
        with tf.GradientTape() as tape:
            direct = total(call(target, fresh({n: tensors[n] for n in data}), model.path, model.structure))
        reached_directly = reverse(tape, direct, variables)
        tensors = fresh(tensors)  # the second call's own tensors: no cached output of the first
        with tf.GradientTape() as tape:
            tape.watch([tensors[n] for n in weights.names])
            through = total(model.function(tensors))
        reached = reverse(tape, through, [tensors[n] for n in weights.names])
    except Exception:  # the forward pass reports its own errors later, with the line
        return []
    return [n for n, d, r in zip(weights.names, reached_directly, reached) if d is not None and r is None]
