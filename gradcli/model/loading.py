"""Load a model definition file into a :class:`Model`: a pure function of named arrays.

The contract (README, "Model files"): the file is imported (its code runs) and
gradcli reads

* ``model``: a callable of tensors (parameters named like the inputs, passed
  positionally in signature order: ``calling.Calling``) or a Keras
  model/layer; ``FILE.py:NAME`` picks another name;
* ``inputs``: a dict name -> value, or a callable taking a
  ``numpy.random.Generator`` and returning one;
* ``wrt`` (optional): the names to differentiate with respect to;
* ``check`` (optional): per-model defaults for ``gradcli check``;
* ``loss``, ``training`` (optional, beside a Keras ``model``): check the loss of
  the model on (``x``, ``y``) by weight, in that training mode (``gradcli.model.keras``).

A plain callable also takes the trainable variables of the file's Keras
layers, ``tf.Module`` and ``tf.Variable`` objects as inputs
(``gradcli.model.variables``). ``FILE.keras`` and SavedModel folders
(``DIR[:SIGNATURE]``, ``gradcli.model.savedmodel``) take their data from ``data``.

Whatever the file holds, the result is the same shape: ``Model.function`` maps
a dict of tensors to a dict of named output tensors, and ``Model.point`` holds
the value of every argument. A Keras model becomes a function of its weights
(named by variable path, e.g. ``dense/kernel``) and its data inputs through
``stateless_call``, so the numeric and analytic sides treat weights and inputs
alike.

The steps live in their own modules, and this one runs them in order and
exposes their names to the rest of gradcli: ``importing`` (the model file and
the ``imports`` option's modules), ``model_file`` (its ``model`` and
``inputs``), ``point`` (the ``set`` and ``wrt`` options),
``dtype_choice`` (float64 or the model's own dtype) and ``running`` (the
forward pass at the point).
"""

from __future__ import annotations

import random
from types import ModuleType

import numpy as np

from gradcli.errors import UsageError
from gradcli.model.core import (  # re-exported: the names the rest of gradcli imports from here
    CHECK_DTYPE, Model, call_model, code_site, differentiable, first_cotangents, first_line, host_array,
    is_floating, is_keras, name_list, normalize_outputs, require_finite, run_model,
    trace_specs, weight_name, where_raised,
)
from gradcli.model.dtype_choice import settle_dtype
from gradcli.model.importing import import_model_file, import_modules, own_modules, package_of  # noqa: F401
from gradcli.model.keras import load_keras_file
from gradcli.model.model_file import definition_site, model_of_module, read_inputs  # noqa: F401
from gradcli.model.paths import is_saved_model, relative_path, split_spec  # noqa: F401
from gradcli.model.point import apply_overrides, check_finite_inputs, choose_wrt
from gradcli.model.project import project_folder
from gradcli.model.random_state import KERNELS
from gradcli.model.running import REPEAT_ULPS, forward  # noqa: F401
from gradcli.model.savedmodel import load_saved_model
from gradcli.options import LoadOptions
from gradcli.tf_import import import_tensorflow


def load_model(
    spec: str | ModuleType,
    *,
    wrt: list[str] | None = None,
    set: dict[str, np.ndarray] | None = None,  # noqa: A002 - the option is named so
    rng_seed: int = 0,
    native_dtype: bool = False,
    input: dict[str, np.ndarray] | None = None,  # noqa: A002 - the option is named so
    imports: list[str] | None = None,
    loss: str | None = None,
    explain_failure=None,
    stateless=None,
) -> Model:
    """Load a model file (``FILE.py`` or ``FILE.py:NAME``), or a module
    object holding the same names, at its point. The keywords are the fields
    of ``gradcli.options.LoadOptions`` (``LoadOptions.fields_of(options)``
    takes them from an analysis's options), validated as one.

    ``set`` replaces input values; ``rng_seed`` seeds numpy,
    TensorFlow and Keras before the file is imported and is passed to a callable
    ``inputs``, so random weights and inputs are reproducible. Unless
    ``native_dtype``, the floating inputs are promoted to float64; if the model
    cannot run in float64 it runs in its own dtype and a note says so. A saved
    Keras model (``FILE.keras``) or SavedModel folder (``DIR`` or
    ``DIR:SIGNATURE``) takes its data inputs from ``input``; a ``.keras``
    file's ``loss`` (``"compiled"`` or a Keras loss name) makes the checked
    function that loss on the targets ``input["y"]`` (``keras.load_keras_file``).
    ``imports`` (modules importable from the project folder, or ``.py``
    files) are imported first, so that the custom classes they register are
    known when a saved model is deserialized (``import_modules``).
    ``explain_failure(model, exc)`` words why the gradient raised in float64
    only, for the note (``analyses.load`` hands it the verdicts' account,
    which names the op; without it, TensorFlow's first line).
    ``stateless(model)``: whether an earlier load of the same function at
    the same inputs found no stateful op in its trace, and what the caller
    kept of that load still computes this function (``analyses.check.warm``):
    then the model is not traced again to learn it.
    """
    LoadOptions(wrt=wrt, set=set or {}, rng_seed=rng_seed, native_dtype=native_dtype, input=input or {},
                imports=list(imports or []), loss=loss)
    # The steps below say what each value is for: values that override inputs,
    # the data of a saved model, whether to promote to float64.
    overrides, data, float64 = set or {}, input or {}, not native_dtype
    # A function and its values (the Python API) run nothing before the forward
    # pass: TensorFlow and Keras are seeded (which clears TensorFlow's kernel
    # cache) only if the model runs a stateful op (``_finish``); a model file,
    # a Keras model or an ``inputs`` callable may draw random numbers before,
    # so every stream is seeded first, as it always was.
    deferred = (isinstance(spec, ModuleType) and not is_keras(getattr(spec, "model", None))
                and not callable(getattr(spec, "inputs", None)))
    if deferred:
        random.seed(rng_seed)
        np.random.seed(rng_seed)
    else:
        seed_everything(rng_seed)
    if isinstance(spec, ModuleType):  # already imported (the Python API builds one)
        module, path, entry = spec, getattr(spec, "__file__", None) or spec.__name__, None
    else:
        path, entry = split_spec(str(spec))
        import_modules(imports or [], project_folder(path))
        if loss is not None and not (path.endswith(".keras") and entry is None):
            raise UsageError("{@loss} applies to a saved Keras model (FILE.keras); a model file sets its `loss` itself")
        saved = _saved_model(path, entry, data or {}, float64, loss)
        if saved is not None:
            return _finish(saved, overrides, wrt, None, float64, rng_seed, explain_failure)
        if data:
            raise UsageError(
                "{@input} gives the data of a .keras or SavedModel MODEL; to change a model "
                "file's inputs use {@set}"
            )
        module = import_model_file(path)
    file_wrt = getattr(module, "wrt", None)
    model = model_of_module(module, path, entry, rng_seed, float64)
    model = _finish(model, overrides, wrt, file_wrt, float64, rng_seed, explain_failure, deferred, stateless)
    if model.structure is not None:
        model.notes.extend(model.structure.notes(model.point, model.wrt))
    return model


def _saved_model(path: str, entry: str | None, data: dict, float64: bool, loss=None) -> Model | None:
    """A saved Keras model (``FILE.keras``) or SavedModel folder (``DIR[:NAME]``), else None."""
    if path.endswith(".keras") and entry is None:
        return load_keras_file(path, data, float64, loss)
    if is_saved_model(path):
        return load_saved_model(path, entry, data)
    return None


def _finish(model: Model, overrides, wrt, file_wrt, float64: bool, rng_seed: int = 0,
            explain_failure=None, deferred: bool = False, stateless=None) -> Model:
    """Apply the ``overrides``, choose what to differentiate, and run the forward pass once.
    ``deferred``: the kernel cache was not cleared when seeding; ``stateless``
    as ``load_model`` takes it."""
    apply_overrides(model, overrides or {})
    model.native_dtypes = {n: v.dtype for n, v in model.point.items()}
    model.wrt = choose_wrt(model, wrt, file_wrt)
    check_finite_inputs(model)
    if deferred:
        vouched = stateless is not None and stateless(model)
        model.stateful = False if vouched else needs_fresh_kernels(model)
        if model.stateful:
            seed_everything(rng_seed)  # the seeding a model file gets, and the fresh kernels with it
    settle_dtype(model, float64, rng_seed, explain_failure)
    return model


def seed_everything(seed: int) -> None:
    tf = import_tensorflow()

    np.random.seed(seed)
    tf.random.set_seed(seed)
    KERNELS["reset"] = True  # tf.random.set_seed cleared the kernel cache
    try:
        import keras

        # Fresh Keras name counters, so a model's weights are named the same
        # (dense/kernel, not dense_2/kernel) whatever was loaded before in this process.
        keras.backend.clear_session(free_memory=False)
        keras.utils.set_random_seed(seed)
    except Exception:  # keras absent or older: TF and numpy are seeded already
        pass


#: graph ops that run another graph (a ``tf.function``): counted as stateful
#: whatever their body, so a stateful op inside one cannot be missed
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def needs_fresh_kernels(model: Model) -> bool:
    """Whether the model's forward pass may run a stateful op, so that the
    kernel cache must be cleared before it to give the same values in every
    call (a seeded ``tf.random.uniform`` restarts only in a fresh kernel).

    The model is traced once in graph mode at its point (the trace the graph
    rules take, kept in ``Model.first_trace`` so that the model's Python runs
    no more often than before). Tracing runs no kernel. A model without a
    stateful op (``OpDef.is_stateful``: random ops, variables, a call of a
    ``tf.function`` counted as one) computes the same values whatever the
    kernel cache holds, so clearing it can change none of them. True, the
    cache to be cleared, when the trace fails (the eager run may take other
    paths) or draws from numpy's or Python's global random stream (their state
    is put back, and the graph rules trace the model again later, as before).
    """
    tf = import_tensorflow()
    names, specs, function = list(model.point), trace_specs(model.point), model.function

    def traced(*args):
        return function(dict(zip(names, args)))

    streams = random.getstate(), np.random.get_state()
    try:
        wrapped = tf.compat.v1.wrap_function(traced, specs)
    except Exception:  # not traceable: the eager pass decides its own paths
        wrapped = None
    drawn = random.getstate() != streams[0] or not _same_numpy_state(np.random.get_state(), streams[1])
    if wrapped is None or drawn:
        random.setstate(streams[0])
        np.random.set_state(streams[1])
        return True
    model.first_trace = (function, specs, wrapped)
    return any(_stateful(op) for op in wrapped.graph.get_operations())


def runs_state(op) -> bool:
    """A stateful op (``OpDef.is_stateful``: a random draw, a variable read) or
    a call of a ``tf.function`` (counted as one whatever its body); an op
    without a definition counts as one."""
    try:
        return op.type in CALL_OPS or op.op_def.is_stateful
    except Exception:  # an op without a definition: assume the worst
        return True


def _stateful(op) -> bool:
    """A stateful op, a call (``runs_state``), or an op whose gradient is the
    model's own (``tf.custom_gradient``, a gradient override): its gradient's
    ops are not in the trace, and may draw random numbers
    (tests/models/nondeterministic_gradient.py)."""
    if runs_state(op):
        return True
    try:
        op.get_attr("_gradient_op_type")
    except ValueError:  # no gradient of its own
        return False
    return True


def _same_numpy_state(a, b) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and tuple(a[2:]) == tuple(b[2:])
