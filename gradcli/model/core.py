"""What every model loader shares: the :class:`Model` type and its helpers.

A loader (``loading`` for model files, ``keras`` for Keras models and
``.keras`` files, ``savedmodel`` for SavedModel folders, ``variables`` for the
weights a plain callable closes over) turns what the user saved into a
``Model``: ``Model.function`` maps a dict of tensors to a dict of named output
tensors (``normalize_outputs``), and ``Model.point`` holds the value of every
argument. The loaders import this module and never each other's internals, so
the package has no import circle: ``core`` imports no loader.

Also here, because every loader needs them: the dtype tests (``is_floating``,
``differentiable``, ``host_array``), weight naming (``weight_names``), and where
an error points (``where_raised``, ``code_site``: a ``file:line`` in the
user's code, never gradcli's, TensorFlow's or Python's).
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

import numpy as np

from gradcli.errors import error_line, GradcliError, ModelError
from gradcli.results.words import LISTED_NAMES, name_list  # noqa: F401 - the model modules take them from here
from gradcli.model.calling import Calling, OwnCall
from gradcli.model.paths import relative_path
from gradcli.model.structure import flatten_outputs
from gradcli.tf_import import import_tensorflow

#: The dtype checks run in whenever the model runs in it (``dtype_choice.settle_dtype``).
CHECK_DTYPE = np.float64


@dataclass
class Model:
    """A loaded model: ``function(values) -> {output name: tensor}`` at ``point``."""

    name: str
    path: str
    function: Callable[[dict], dict]
    point: dict[str, np.ndarray]
    wrt: list[str]
    native_dtypes: dict[str, np.dtype]
    kind: str = "function"  # "function", "keras" or "savedmodel"
    #: The names (x, y) of a bijector's inputs, forward's and inverse's, when
    #: the model file's model is a bijector (``model.bijector``), else None
    bijector: tuple | None = None
    settings: dict = field(default_factory=dict)
    module: ModuleType | None = None
    notes: list[str] = field(default_factory=list)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    weights: list[str] = field(default_factory=list)  # Keras: trainable weight names
    #: Weights of the file's objects the model reads in a way gradcli cannot
    #: vary (a ``tf.function`` defined elsewhere captured them): left as they
    #: are, not inputs; ``point.choose_wrt`` refuses a ``wrt`` that asks for one
    unvaried: list[str] = field(default_factory=list)
    #: Inputs the model is scored against, never differentiated unless named
    #: (``wrt``): a Keras ``loss``'s targets ``y``
    targets: list[str] = field(default_factory=list)
    #: Floating inputs the model file wrote as Python numbers (``[1.0, 2.0]``):
    #: float64 to numpy, float32 to TensorFlow (``dtype_choice.settle_dtype``)
    python_numbers: list[str] = field(default_factory=list)
    runs_in_float64: bool = True  # False: promoting inputs would not change the compute dtype
    #: Inputs the model itself converts to another floating dtype when called (a
    #: Keras model's data: its Input's dtype): name -> dtype, the dtype
    #: ``dtype_choice.settle_dtype`` falls back to when float64 does not run.
    own_dtypes: dict = field(default_factory=dict)
    own_call: OwnCall | None = None  # the user's own call, for ``verdicts.same_function``
    #: (point, cotangents, VJP) taken through ``function`` at the point with
    #: ``first_cotangents`` (loading's float64 gradient test, or
    #: ``same_function.prove``), reused by the proof, the gradient-path rule and
    #: the checks' first probe instead of a reverse pass each
    taken_vjp: tuple | None = field(default=None, repr=False)
    #: A Keras model run in float64 by switching its layers' dtype policies
    #: (``keras_float64.stateless_float64_call``), not through a float64 clone
    float64_by_policies: bool = False
    #: ``function`` is a pure function of its arguments: a Keras model (its
    #: float64 clone, or itself) called by ``stateless_call`` in inference mode,
    #: reading no state that checking it (or its layers) writes. Not so for a
    #: model run by switching dtype policies (a switch is state), training mode
    #: (the user's own layers, called for the proofs, update their statistics),
    #: a model file's function (any Python) or a network of tf.Modules (its
    #: weights are set as attributes). ``check_model`` runs the joint check
    #: beside the layer pass only for a pure one.
    pure_call: bool = False
    #: seconds of one eager call of ``function`` at the point, timed at load
    forward_seconds: float | None = None
    #: how a model function's arguments nest (``structure.Structure``): ``point``
    #: holds the leaves (``params.w``, ``x.values``), the function rebuilds the rest
    structure: object | None = None
    #: complex outputs were split into real and imaginary parts (``structure.split_complex_outputs``)
    complex_outputs_split: bool = False
    #: (function, specs, ``wrap_function`` trace) taken at load to learn whether the
    #: model runs a stateful op (``loading.needs_fresh_kernels``); the graph rules
    #: reuse it while ``function`` and the specs (``trace_specs``) are the same
    first_trace: tuple | None = field(default=None, repr=False)
    #: What makes two loads of a plain callable the same function of the same
    #: flat named inputs (the callable and how it is called; None for any other
    #: model): a warm check reuses what it traced for the earlier one
    #: (``analyses.check.warm``) while that proves to be this function.
    trace_key: tuple | None = field(default=None, repr=False)
    #: Whether the model's forward pass may run a stateful op (``loading``'s
    #: trace, ``needs_fresh_kernels``; or an earlier load's, which the caller
    #: vouched for: ``load_model``'s ``stateless``). None: not asked (the
    #: model was seeded before it was built).
    stateful: bool | None = None
    #: A unit of the layer pass (``analyses.layers.local``), not a whole model:
    #: where no TensorFlow path reaches its output (a PositionEmbedding reads
    #: only its input's shape) its pairs are judged by the disconnected rule on
    #: the finite differences' evidence, not refused (``reach``'s rule is the
    #: whole model's)
    unit: bool = False

    @property
    def dtype(self) -> np.dtype:
        """The floating dtype the checks run in (float64 unless the model refused it)."""
        floats = [v.dtype for n, v in self.point.items() if n in self.wrt]
        return floats[0] if floats else np.dtype(CHECK_DTYPE)

    def call(self, values: dict | None = None) -> dict:
        """Run the model eagerly at ``values`` (default: the point)."""
        return run_model(self, self.point if values is None else values)


def is_floating(array: np.ndarray) -> bool:
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def first_cotangents(outputs: dict, seed: int) -> dict:
    """The cotangents of the first reverse-mode product at the point: a
    standard normal draw per floating output, in order, from ``seed``'s
    generator (the proof's, and the first probe's of a fast check)."""
    rng = np.random.default_rng(seed)
    return {o: rng.standard_normal(np.shape(v)) for o, v in outputs.items() if is_floating(np.asarray(v))}


def differentiable(array: np.ndarray) -> bool:
    """Floating with at least one element: an output the checks differentiate.
    An empty output has no derivative to compare, and a check of it would pass
    without having compared anything."""
    return is_floating(array) and np.size(array) > 0


def host_array(value) -> np.ndarray:
    """A tensor as numpy; bfloat16 (Keras ``mixed_bfloat16`` outputs) as float32,
    which holds every bfloat16 value exactly: numpy does not count ml_dtypes'
    bfloat16 as floating, so it would not be checked. The check's rules still
    follow bfloat16, the lowest precision on the path (``ModelGraph.precision``)."""
    array = np.asarray(value)
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def weight_name(path: str) -> str:
    """``sequential/dense/kernel`` -> ``dense/kernel``: drop the model's own name."""
    parts = path.split("/")
    return "/".join(parts[1:]) if len(parts) > 2 else path


#: Joins a name several distinct weights share and the weight's number among
#: them, from 0 (``self_attention/embeddings-1``), as TensorFlow numbers the
#: children of one kind in a checkpoint (``layer_with_weights-0``). A name is
#: also a TensorFlow node name (``trace_specs``), which ``#`` or ``:`` cannot
#: be in; the options that take names split on ``,`` and ``=`` only.
SHARED_MARK = "-"


def weight_names(paths: list[str], short: list[str] | None = None) -> list[str]:
    """The names of distinct weights (one entry per variable object, in the
    model's order) with variable paths ``paths``, all different. The one rule
    every loader names weights by (docs/model-files.md, "Weight names"):

    1. a weight is named by its path without the model's name (``short``,
       default ``weight_name``: ``dense/kernel``);
    2. if two weights' short names are the same, every weight is named by its
       whole path (``encoder/dense/kernel``, ``decoder/dense/kernel``);
    3. the weights whose whole paths are the same too (keras-hub's
       ``T5Backbone`` holds two variables at ``self_attention/embeddings``,
       the relative position biases of its encoder and its decoder) are
       numbered from 0 in the model's order: ``self_attention/embeddings-0``,
       ``self_attention/embeddings-1``. Keras pairs weights with values by
       position, never by name, so a name shared by two weights would hand
       one of them no value.
    """
    short = [weight_name(p) for p in paths] if short is None else list(short)
    return numbered(short if len(set(short)) == len(short) else list(paths))


def numbered(names: list[str]) -> list[str]:
    """``names`` with those several share numbered from 0 in order
    (``a``, ``a`` -> ``a-0``, ``a-1``; ``SHARED_MARK``), the others as they are:
    rule 3 of ``weight_names``, and the layer pass's units that share a path."""
    names = list(names)
    counts = Counter(names)
    taken, last, result = set(names), {}, []
    for name in names:
        if counts[name] == 1:
            result.append(name)
            continue
        number = last.get(name, -1) + 1
        while f"{name}{SHARED_MARK}{number}" in taken:  # a path that already ends so
            number += 1
        last[name] = number
        taken.add(f"{name}{SHARED_MARK}{number}")
        result.append(f"{name}{SHARED_MARK}{number}")
    return result


def shared_name(name: str, known) -> list[str]:
    """The numbered names (rule 3 of ``weight_names``) of the weights that share
    ``name``, when ``name`` is not itself among ``known``: [] otherwise."""
    if name in known:
        return []
    prefix = f"{name}{SHARED_MARK}"
    return [n for n in known if n.startswith(prefix) and n[len(prefix):].isdigit()]


def first_line(exc: BaseException) -> str:
    """The line of ``exc``'s message that says what went wrong (``errors.error_line``)."""
    return error_line(exc)


def where_raised(exc: BaseException, path: str) -> str:
    """``file:line`` of the deepest frame of ``exc`` inside ``path``, else in
    the user's own code (a helper module beside it), else ``path`` alone: an
    error location never names gradcli's, TensorFlow's or Python's files."""
    frames = traceback.extract_tb(exc.__traceback__)
    path = os.path.abspath(path)
    inside = [f for f in frames if os.path.abspath(f.filename) == path]
    frame = (inside or [f for f in frames if is_user_file(f.filename)] or [None])[-1]
    if frame is None:
        return relative_path(path)
    return f"{relative_path(frame.filename)}:{frame.lineno}"


def is_user_file(filename: str) -> bool:
    filename = os.path.abspath(filename)
    if not os.path.isfile(filename):  # <string>, frozen modules, TensorFlow's generated code
        return False
    return not any(filename.startswith(folder) for folder in _system_folders())


@functools.lru_cache(maxsize=1)
def _system_folders() -> tuple[str, ...]:
    """The folders whose files are not the user's: Python's own, the installed
    packages', and gradcli's (each with a trailing separator)."""
    import sysconfig

    system = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    system.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # gradcli itself
    return tuple(os.path.join(folder, "") for folder in system if folder)


def code_site(obj) -> str | None:
    """``file:line`` of the ``def`` of a function (or of a callable object's
    ``__call__``), or None for objects without Python source (Keras models,
    builtins, partials). A decorated function (``tf.custom_gradient``, or any
    decorator that sets ``__wrapped__``) is the user's own function, not the
    decorator's wrapper: its line is where the user wrote it."""
    inner = _unwrapped(obj)
    if inner is not obj:
        code = inner.__code__
        if os.path.isfile(code.co_filename):
            return f"{relative_path(code.co_filename)}:{_def_line(code)}"
    code = getattr(obj, "__code__", None) or getattr(getattr(type(obj), "__call__", None), "__code__", None)
    if code is not None and os.path.isfile(code.co_filename) and not is_keras(obj):
        return f"{relative_path(code.co_filename)}:{code.co_firstlineno}"
    return None


def _def_line(code) -> int:
    """The ``def`` line of a decorated function (``co_firstlineno`` is its
    first decorator's)."""
    import linecache
    import re

    lines = linecache.getlines(code.co_filename)
    for number in range(code.co_firstlineno, min(len(lines), code.co_firstlineno + 50) + 1):
        if re.match(r"\s*(async\s+)?def\s", lines[number - 1]):
            return number
    return code.co_firstlineno


def _unwrapped(obj):
    """``obj`` with its decorators' ``__wrapped__`` followed to the function
    underneath (``inspect.unwrap``); ``obj`` itself when the chain loops or
    ends in no function (a Keras model's attributes)."""
    import inspect

    try:
        inner = inspect.unwrap(obj)
    except ValueError:  # a __wrapped__ cycle
        return obj
    return inner if inner is not obj and inspect.isfunction(inner) else obj


def trace_specs(point: dict) -> list:
    """The ``tf.TensorSpec`` of each value of ``point``, named, in order: what the model is traced at."""
    tf = import_tensorflow()
    return [tf.TensorSpec(np.shape(v), tf.as_dtype(np.asarray(v).dtype), name=n) for n, v in point.items()]


def is_keras(obj) -> bool:
    if "keras" not in sys.modules and "tensorflow" not in sys.modules:
        return False
    try:
        import keras
    except ImportError:
        return False
    return isinstance(obj, keras.layers.Layer)


def run_model(model: Model, values: dict) -> dict:
    """Eager forward pass; any exception becomes a ModelError naming the file line."""
    tf = import_tensorflow()

    try:
        from gradcli.numerics.autodiff import fresh

        return model.function(fresh(values))  # tensors of this call's own (held arrays: ``numerics.held``)
    except (GradcliError, KeyboardInterrupt):  # a GradcliError already says where
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit, the user's own BaseException
        raise ModelError(
            f"{where_raised(exc, model.path)}: forward pass raised "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from None


def call_model(
    target: Callable, values: dict, site: str, path: str, calling: Calling | None = None, structure=None,
) -> dict:
    """The model file's callable on a dict of tensors, called as the user calls
    it (``calling.Calling``: positionally in signature order, so a
    ``tf.custom_gradient`` model runs its own gradient), outputs named and
    checked (``normalize_outputs``, errors at ``site``). With a ``structure``
    (``structure.Structure``), ``values`` are its leaves and the function
    receives its arguments rebuilt: nested dicts, lists, sparse tensors.

    An exception that is not an ``Exception`` (``sys.exit()``, ``GeneratorExit``,
    the user's own ``BaseException``) becomes a ModelError wherever the model is
    called, in the forward pass or deep in an analysis: left alone, a late
    ``sys.exit(0)`` would end the run with exit 0 and no report. Ctrl-C stays
    Ctrl-C; ordinary exceptions keep their meaning for the callers (a model that
    cannot be traced falls back to eager calls)."""
    if structure is not None:
        values = structure.rebuild(values)
    calling = calling or Calling.of(target, values)
    try:
        result = calling(target, values)
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise ModelError(
            f"{where_raised(exc, path)}: forward pass raised {type(exc).__name__}: {first_line(exc)}"
        ) from None
    return normalize_outputs(result, site, structure=structure)


def require_finite(model_name: str, kind: str, arrays: dict, why: str) -> None:
    """Raise a ModelError naming the first NaN/Inf element among ``arrays``."""
    for name, value in arrays.items():
        if is_floating(value) and not np.all(np.isfinite(value)):
            index = tuple(int(i) for i in np.argwhere(~np.isfinite(value))[0])
            raise ModelError(
                f"{model_name}: {kind} {name!r} is {value[index]} at element "
                f"{list(index)}{why}"
            )


def normalize_outputs(result, site: str = "the model", what: str = "the model", structure=None) -> dict:
    """A tensor -> {"output": t}; a tuple -> {"0": ..., "1": ...}; a dict -> str keys;
    nested dicts, lists and tuples of tensors -> one output per leaf, named by
    its path (``parts.p``, ``structure.flatten_outputs``); a ``tf.SparseTensor``
    -> its dense form (recorded in ``structure.sparse_outputs`` for the note).

    Anything that is not a tensor per leaf (None, an empty dict, a RaggedTensor,
    an object TensorFlow cannot convert) is a ModelError at ``site``, the
    ``file:line`` of the function that returned it.
    """
    if result is None:
        raise ModelError(
            f"{site}: {what} returned None; return a tensor, a tuple of tensors or a dict "
            "of name -> tensor"
        )
    if isinstance(result, dict):
        items = {str(k): v for k, v in result.items()}
    elif isinstance(result, (tuple, list)):
        items = {str(i): v for i, v in enumerate(result)}
    else:
        items = {"output": result}
    if not items:
        raise ModelError(f"{site}: {what} returned an empty {type(result).__name__}: no outputs")
    return flatten_outputs(
        items, lambda v, k: _dense_tensor(v, k, site), site,
        None if structure is None else structure.sparse_outputs,
    )


#: Output types that are not one dense tensor, and what to return instead.
_NOT_DENSE = {
    "RaggedTensor": "return its .to_tensor() instead",
}


def _dense_tensor(value, name: str, site: str):
    tf = import_tensorflow()

    kind = type(value).__name__
    if isinstance(value, tf.RaggedTensor):
        raise ModelError(f"{site}: output {name!r} is a tf.{kind}; {_NOT_DENSE[kind]}")
    if isinstance(value, (dict, list, tuple)) and not value:
        raise ModelError(f"{site}: output {name!r} is an empty {kind}; each output must hold a tensor")
    if value is None:
        raise ModelError(
            f"{site}: output {name!r} is None; each output must be a tensor (or a nest of them)"
        )
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise ModelError(f"{site}: output {name!r} is a {kind}, not a tensor") from None
