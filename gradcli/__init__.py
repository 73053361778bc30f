"""gradcli: check and inspect gradients of TensorFlow models.

Every command of the command line is a function here, taking what the command
takes and returning the result object the command renders (``gradcli.results``):

    >>> import gradcli
    >>> result = gradcli.check("sample_models/square.py", rtol=1e-8)
    >>> result.ok, result.exit_code
    (True, 0)
    >>> gradcli.vjp(lambda x: x * x, ([1.0, 2.0],)).arrays()["x"]
    array([2., 4.])

``model`` is a model file (``FILE.py``, ``FILE.py:NAME``, ``FILE.keras``), a
SavedModel folder (``DIR``, ``DIR:SIGNATURE``; its data in ``input=``) or the
model itself: a callable of tensors or a Keras model, with ``inputs`` as in a
model file (a dict of arrays, or a callable taking a numpy Generator) or, as
torch's ``gradcheck`` and jax's ``check_grads`` take them, a tuple of arrays
in the order of the callable's parameters (``(x, y)``; one array alone is the
only argument). ``inputs`` is every function's second argument, positional
(``gradcli.check(f, (x, y))``) or by keyword (``inputs=(x, y)``); a model
file defines its own. A model file that does not exist raises ``UsageError``
in every function, before anything runs.

Keyword arguments are the command's long options, spelled with underscores,
and the fields of the options dataclasses have the same names (``gradcli.options``):
``rtol``, ``rng_seed``, ``native_dtype=True`` (``--native-dtype``),
``set={"x": [1.0]}`` (``--set``), ``input={...}`` (``--input``), ``xla=False``
(``--no-xla``), ``cotangents={...}`` (``--cotangent``, also spelled
``cotangent``). A VALUE may be an array, a list or a string as the command
line reads it (``"@h.npz:output"``); names (``wrt``, ``of``, ``fail_on``) a
list or a comma-separated string (``KEYWORDS``: the one other spelling). An unknown
keyword raises ``gradcli.UnknownKeyword`` (a ``UsageError`` and a
``TypeError``) naming it, the nearest known one and every keyword the
function takes. Every function raises ``gradcli.UsageError`` for a bad
argument, named by its keyword (``wrt: unknown input 'y' (known: x)``; the
command line names the flag, ``--wrt``), ``check`` too, and
``gradcli.ModelError`` for a model that cannot be loaded or run (``check``
reports that as the model's error row instead, as on the command line).
pyproject.toml is not read: the call says what it means.

A result reads as the command shows it: ``str(result)`` is the text report,
``bool(result)`` is ``result.ok`` and ``repr(result)`` one line
(``<CheckResult: 1 model, 1 passed, exit 0>``; ``gradcli.results.outcome``).

Importing this package does not import TensorFlow; each function imports it
when first called. A call leaves the caller's random streams as they were
(numpy's and ``random``'s global state, TensorFlow's global seed, Keras' seed
and session: ``gradcli.model.random_state``), and must be made eagerly:
inside a ``tf.function`` it raises ``UsageError``.
``gradcli.testing.assert_gradients_ok`` wraps ``check`` for test suites.
"""

import functools as _functools
import os as _os
import sys as _sys
import types as _types

from gradcli.errors import ModelError, UnknownKeyword, UsageError

__version__ = "0.1.0"

__all__ = [
    "check", "forward", "vjp", "jvp", "jacobian", "hessian", "logdet",
    "UsageError", "ModelError", "UnknownKeyword", "KEYWORDS", "__version__",
]
#: Submodules that are part of the public API besides ``__all__``.
_PUBLIC_MODULES = ("errors", "options", "results", "testing")


def __dir__():
    """The public names only: not the modules this one imports, nor the
    private helpers or the submodules gradcli loads as it runs."""
    return sorted([*__all__, *_PUBLIC_MODULES])


def __getattr__(name):
    """The public submodules (``gradcli.results``...), imported when first named."""
    if name in _PUBLIC_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Every keyword is an options field's name, which is its option's (``rtol``,
#: ``native_dtype``, ``set``, ``input``, ``xla``). The one other spelling a
#: function takes: the singular of an option repeated per output or input
#: (``--cotangent``, ``--tangent``), for the plural keyword that takes every
#: seed at once. keyword -> field; never both in one call.
KEYWORDS = {
    "cotangent": "cotangents",
    "tangent": "tangents",
}
#: Fields that hold named arrays (VALUEs) and fields that hold names.
_ARRAY_FIELDS = ("set", "input", "cotangents", "tangents")
_NAME_FIELDS = ("wrt", "of", "fail_on", "layers")


def _api(function=None, *, earlier_second: str | None = None):
    """Run an API function eagerly, with the caller's random streams saved and
    restored around it (``gradcli.model.random_state``), and its usage errors
    naming parameters as the call's keywords (``_respelled``).

    ``inputs`` is every function's second positional parameter, as in torch's
    ``gradcheck(f, inputs)`` and jax's ``check_grads(f, args, order)``.
    ``earlier_second`` names the parameter that was second before
    (``vjp``'s ``cotangents``, ``jvp``'s ``tangents``, ``jacobian``'s ``of``):
    a call that gives ``inputs=`` by keyword, or a model file (which defines
    its own inputs), still passes that one second."""
    if function is None:
        return lambda function: _api(function, earlier_second=earlier_second)

    @_functools.wraps(function)
    def call(*args, **kwargs):
        _require_eager(function.__name__)
        model = args[0] if args else kwargs.get("model")
        path = _is_path(model)
        if path:
            _existing(_os.fsdecode(model))  # before any other argument is looked at
        if earlier_second and len(args) == 2 and ("inputs" in kwargs or path):
            if earlier_second in kwargs:
                raise TypeError(f"{function.__name__}() got multiple values for argument {earlier_second!r}")
            args, kwargs = args[:1], {**kwargs, earlier_second: args[1]}
        from gradcli.model.random_state import callers_state

        from gradcli.errors import spell_texts

        try:
            with callers_state():
                result = function(*args, **kwargs)
        except UsageError as error:
            if not error.names_parameters:
                raise
            raise _respelled(error, {KEYWORDS.get(key, key): key for key in kwargs}) from None
        # Messages inside the result (error rows, notes) name parameters as keywords.
        return spell_texts(result, lambda name: name)

    return call


def _is_path(model) -> bool:
    return isinstance(model, (str, bytes)) or hasattr(model, "__fspath__")


def _require_eager(function: str) -> None:
    """A model is run, differentiated and compared with numpy values: none of
    that can happen while a ``tf.function`` is being traced."""
    tf = _sys.modules.get("tensorflow")
    if tf is not None and not tf.executing_eagerly():
        from gradcli.errors import UsageError

        error = UsageError(
            f"gradcli.{function}() runs the model eagerly and cannot be called inside a "
            "tf.function or a graph: call it outside"
        )
        error.ag_pass_through = True  # autograph re-raises it as it is, not as a StagingError
        raise error


#: What ``check`` takes besides the fields of ``CheckOptions``.
_CHECK_RUN = ("inputs", "fail_fast", "jobs", "progress", "isolate")


@_api
def check(model, inputs=None, *, fail_fast=False, jobs=1, progress=None, isolate=False, **options):
    """Compare analytic gradients with finite differences (``gradcli check``).

    ``model`` may also be a folder or a list of model files (a batch). ``options``
    are the options of ``gradcli check`` (``mode``, ``rtol``, ``atol``, ``probes``,
    ``rng_seed``, ``wrt``, ``set``, ``input``, ``native_dtype``, ``xla``,
    ``order``, ``allow_surrogate``, ``taylor``, ``samples``, ``fail_on``...: the
    fields of ``gradcli.options.CheckOptions``); they win over a model file's
    ``check`` dict. ``isolate=True`` checks each model file in a supervised
    worker process, as the command line does, so one that ends its process
    (``os._exit``) is an error row rather than the end of the caller's.
    Returns a ``CheckResult``; a model that cannot be loaded or run is a
    ``ModelResult`` with ``error`` set.

        >>> gradcli.check(lambda x: tf.sin(x), ([0.5],), mode="full").ok
        True
    """
    from gradcli.model.paths import expand_models
    from gradcli.options import CheckOptions

    fields, used = _keywords("check", options, CheckOptions, _CHECK_RUN)
    checked = _build(CheckOptions, fields, used)
    if isinstance(model, (list, tuple)):
        if inputs is not None:
            raise UsageError("gradcli.check(): inputs= is for a model object; a model file defines its own")
        specs = [_existing(_os.fsdecode(m)) for m in model]
    else:
        specs = [_spec(model, inputs, "check")]
    if all(isinstance(spec, str) for spec in specs):
        specs = expand_models(specs)  # a file named twice is checked once
    else:
        specs = [s for spec in specs for s in (expand_models([spec]) if isinstance(spec, str) else [spec])]
    from gradcli.workers.batch import check_batch

    return _raise_usage(check_batch(
        specs, checked, fixed=set(fields), fail_fast=fail_fast, jobs=jobs, progress=progress, isolate=isolate,
    ))


def _raise_usage(result):
    """``result``, unless a model's row is a usage error (exit 2: a keyword
    that does not fit the model, like ``wrt`` naming no input of it): then
    that error, raised, as every other function raises it. The command line
    reports it as the model's error row instead."""
    for model in result.models:
        if model.error_code == UsageError.exit_code:
            raise UsageError(model.error)  # its parameters as {@name}, spelled as keywords
    return result


@_api
def forward(model, inputs=None, **options):
    """Each output's shape, dtype and values at the model's point (``gradcli forward``).

    ``options``: ``wrt``, ``set``, ``rng_seed``, ``native_dtype``, ``input`` (the
    fields of ``gradcli.options.LoadOptions``). Returns a ``ForwardResult``.
    """
    from gradcli.analyses import inspection

    return inspection.forward(_load(model, inputs, options, "forward"))


@_api(earlier_second="cotangents")
def vjp(model, inputs=None, cotangents=None, *, numeric=False, max_memory=None, **options):
    """J^T c for each differentiated input, summed over outputs (``gradcli vjp``).

    ``cotangents`` (also ``cotangent=``) maps output names to seeds
    (``grad_ys``); outputs without one get zeros, and with none at all every
    output is seeded with ones. ``numeric`` uses finite differences only
    (models TensorFlow cannot differentiate); ``max_memory`` (bytes) bounds its
    Jacobian (``gradcli.memory``). ``options`` as for ``forward``.
    Returns a ``VjpResult``; ``.arrays()`` maps input names to gradients.
    (``cotangents`` was the second argument before ``inputs``:
    ``vjp(f, cotangents, inputs=...)`` and ``vjp("FILE.py", cotangents)`` still work.)

        >>> gradcli.vjp(lambda x: x * x, ([1.0, 2.0],), {"output": [2.0, 3.0]}).arrays()["x"]
        array([ 4., 12.])
    """
    from gradcli.analyses import inspection

    if cotangents is not None:
        options = {**options, "cotangents": cotangents}
    seeds = _pop(options, "cotangents", "vjp", "numeric", "max_memory")
    loaded = _load(model, inputs, options, "vjp")
    return inspection.vjp(loaded, seeds, numeric=numeric, max_memory=max_memory)


@_api(earlier_second="tangents")
def jvp(model, inputs=None, tangents=None, *, numeric=False, max_memory=None, **options):
    """J t for every output, forward mode (``gradcli jvp``).

    ``tangents`` (also ``tangent=``) maps input names to directions; inputs
    without one get zeros; at least one is needed. ``options`` as for
    ``forward``. Returns a ``JvpResult``; ``.arrays()`` maps output names to J t.

        >>> gradcli.jvp(lambda x: x * x, ([1.0, 2.0],), {"x": [1.0, 0.0]}).arrays()["output"]
        array([2., 0.])
    """
    from gradcli.analyses import inspection
    from gradcli.errors import UsageError

    if tangents is not None:
        options = {**options, "tangents": tangents}
    given = _pop(options, "tangents", "jvp", "numeric", "max_memory")
    if not given:
        raise UsageError("needs at least one input's direction (a dict INPUT -> VALUE)", param="tangents")
    loaded = _load(model, inputs, options, "jvp")
    return inspection.jvp(loaded, given, numeric=numeric, max_memory=max_memory)


@_api(earlier_second="of")
def jacobian(model, inputs=None, of=None, *, numeric=False, mode="auto", max_memory=None, **options):
    """The full Jacobian of each output (``of``: names, default every floating
    output) with respect to each differentiated input (``gradcli jacobian``).
    ``mode`` is ``auto``, ``reverse`` or ``forward``; ``max_memory`` (bytes,
    default half the available memory) bounds the blocks (``gradcli.memory``).
    ``options`` as for ``forward``. Returns a ``JacobianResult``;
    ``.arrays()`` is keyed ``OUTPUT/INPUT``.

        >>> gradcli.jacobian(lambda x: x * x, ([1.0, 2.0],)).arrays()["output/x"]
        array([[2., 0.],
               [0., 4.]])
    """
    from gradcli.analyses import inspection
    from gradcli.errors import UsageError

    if numeric and mode != "auto":
        raise UsageError("chooses between analytic modes; it cannot be combined with {@numeric}", param="mode",
                         bad_value=False)
    loaded = _load(model, inputs, options, "jacobian", "of", "numeric", "mode", "max_memory")
    return inspection.jacobian(loaded, _names(of), numeric=numeric, mode=mode, max_memory=max_memory)


@_api
def hessian(model, inputs=None, **options):
    """Hessian of the model's scalar output: eigenvalues, definiteness, convexity
    (``gradcli hessian``). ``options`` are the options of ``gradcli hessian``
    (``expect``, ``method``, ``samples``, ``radius``, ``cotangents``, ``set``,
    ``native_dtype``...: the fields of ``gradcli.options.HessianOptions``).
    Returns a ``HessianResult``; ``.ok`` is False when ``expect`` fails or the
    Hessian disagrees with finite differences.

        >>> gradcli.hessian(lambda x: tf.reduce_sum(x ** 2), ([1.0, 2.0],),
        ...                 expect="convex").spectrum.eigenvalues
        array([2., 2.])
    """
    from gradcli.options import HessianOptions

    fields, used = _keywords("hessian", options, HessianOptions, ("inputs",))
    checked = _build(HessianOptions, fields, used)
    from gradcli.analyses.hessian import analyse_path

    return analyse_path(_spec(model, inputs, "hessian"), checked)


@_api
def logdet(model, inputs=None, **options):
    """A flow's declared ``log_det_jacobian`` against slogdet of its autodiff
    Jacobian (``gradcli logdet``). ``options``: ``wrt``, ``output``, ``rtol``,
    ``atol``, ``set``, ``rng_seed``, ``max_memory`` (the fields of
    ``gradcli.options.LogdetOptions``). Returns a ``LogdetResult``.
    """
    from gradcli.options import LogdetOptions

    fields, used = _keywords("logdet", options, LogdetOptions, ("inputs",))
    checked = _build(LogdetOptions, fields, used)
    from gradcli.analyses.logdet import check_logdet_path

    return check_logdet_path(_spec(model, inputs, "logdet"), checked)


# --- keywords -----------------------------------------------------------------


def _fields(options_class) -> dict:
    return dict(options_class.__dataclass_fields__)


def _keywords(function: str, given: dict, options_class, extra=()) -> tuple[dict, dict]:
    """The keywords of a call as options fields: ``(fields, used)``, where
    ``fields`` maps each field to its value (converted: VALUEs to arrays, names
    to lists) and ``used`` each field to the
    keyword that set it (for messages). ``extra``: the function's own
    parameters, listed as known but not converted here."""
    from gradcli.errors import UsageError

    declared = _fields(options_class) if options_class is not None else {}
    takes = set(declared) | set(extra)
    spellings = {keyword: field for keyword, field in KEYWORDS.items() if field in takes}
    allowed = takes | set(spellings)
    unknown = [key for key in given if key not in allowed]
    if unknown:
        # The singular spellings are accepted but not listed: the field is.
        raise _unknown_keyword(function, unknown, sorted(takes), sorted(allowed))
    fields, used = {}, {}
    for key, value in given.items():
        field = spellings.get(key, key)
        if field in fields:
            raise UsageError(
                f"gradcli.{function}() got both {used[field]}= and {key}=, which set the same option: give one"
            )
        used[field] = key
        if field in _ARRAY_FIELDS:
            value = _arrays(value, key)
        elif field in _NAME_FIELDS and "list" in str(getattr(declared.get(field), "type", "list")):
            value = _names(value)
            if field == "fail_on" and value is None:
                value = []
        fields[field] = value
    return fields, used


def _unknown_keyword(function: str, unknown: list[str], listed: list[str], allowed: list[str]):
    """The error for keywords ``function`` does not take: the first, the known
    keyword nearest to it, the others, and every keyword it takes."""
    import difflib

    key = unknown[0]
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    more = f" and {', '.join(unknown[1:])}" if len(unknown) > 1 else ""
    return UnknownKeyword(
        f"gradcli.{function}() got an unknown keyword {key}{hint}{more}; it takes: {', '.join(listed)}"
    )


def _build(options_class, fields: dict, used: dict):
    """``options_class(**fields)``, its errors naming the keywords the call used."""
    from gradcli.errors import UsageError

    try:
        return options_class(**{k: v for k, v in fields.items() if k in _fields(options_class)})
    except UsageError as exc:
        raise _respelled(exc, used) from None


def _respelled(error, used: dict):
    """``error`` with each parameter named as the caller spelled it (``used``:
    field -> keyword), else by its own name, the keyword."""
    import re

    spell = lambda name: used.get(name) or name  # noqa: E731
    problem = re.sub(r"\{@(\w+)\}", lambda m: "{@" + spell(m.group(1)) + "}", error.problem)
    return type(error)(problem, param=spell(error.param) if error.param else None, bad_value=error.bad_value)


def _pop(options: dict, field: str, function: str, *extra: str):
    """Take ``field`` (by any of its keywords) out of ``options``, converted."""
    from gradcli.options import LoadOptions

    fields, _ = _keywords(function, options, LoadOptions, (field, "inputs", *extra))
    for key in [k for k in options if KEYWORDS.get(k, k) == field]:
        options.pop(key)
    return fields.get(field)


# --- models and values ------------------------------------------------------------


def _existing(path: str) -> str:
    """``path`` (a model file, ``FILE.py:NAME``, a folder), or ``UsageError``
    when it does not exist: every function says it the same way, before
    anything runs."""
    from gradcli.errors import UsageError

    if _os.path.exists(path):
        return path
    file, colon, entry = path.rpartition(":")
    if colon and entry.isidentifier() and _os.path.exists(file):
        return path
    from gradcli.model.paths import names_a_folder  # the command line's rule: "/" or no suffix

    if names_a_folder(path):
        raise UsageError(f"no such folder: {path}")
    raise UsageError(f"no such model file: {path}")


def _spec(model, inputs, function: str):
    """A model file path as a string, or a model object as a module holding
    ``model`` and ``inputs``: the shape a model file has."""
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        if inputs is not None:
            from gradcli.errors import UsageError

            raise UsageError(f"gradcli.{function}(): inputs= is for a model object; a model file defines its own")
        return _existing(_os.fsdecode(model))
    module = _types.ModuleType(getattr(model, "__name__", None) or type(model).__name__)
    module.model = model
    if inputs is not None:
        module.inputs = _named_inputs(model, inputs, function)
    return module


def _named_inputs(model, inputs, function: str):
    """``inputs`` as a model file gives them: a dict stays, a callable stays
    (what it returns is named when called), a tuple or list gives the model's
    positional parameters in order, and anything else (an array, a tensor, a
    number) is the one argument."""
    if isinstance(inputs, dict):
        return inputs
    if callable(inputs) and not hasattr(inputs, "__array__") and not hasattr(inputs, "numpy"):
        @_functools.wraps(inputs)
        def named(rng):
            return _named_inputs(model, inputs(rng), function)

        return named
    values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    names = _parameter_names(model, len(values), function)
    return dict(zip(names, values))


def _parameter_names(model, count: int, function: str) -> list[str]:
    """The names of the first ``count`` positional parameters of ``model``, as
    ``gradcli.model.calling.Calling`` passes them back (positionally, in
    order); a Keras model's are its input names."""
    import inspect

    from gradcli.errors import UsageError

    where = f"gradcli.{function}(): inputs"
    if _looks_like_keras(model):
        names = [getattr(t, "name", "") for t in (_built_inputs(model) or [])]
        if len(names) == count and all(names):
            return names
        if count == 1:
            return [names[0] if len(names) == 1 and names[0] else "x"]
        raise UsageError(
            f"{where} gives {count} arrays, the Keras model has {len(names) or 'no named'} inputs: "
            "give a dict of its input names"
        )
    try:
        parameters = list(inspect.signature(model).parameters.values())
    except (TypeError, ValueError):
        raise UsageError(
            f"{where}: the model's parameters cannot be read (no signature) to name positional "
            "values: give a dict name -> value"
        ) from None
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p for p in parameters if p.kind is p.VAR_POSITIONAL), None)
    shown = ", ".join(p.name for p in positional) or "none"
    if count > len(positional) and star is None:
        raise UsageError(
            f"{where} gives {count} values, the model takes {_counted(len(positional), 'positional parameter')} "
            f"({shown}): one value per parameter, in order (for one array, write inputs=(array,) "
            "or a dict)"
        )
    missing = [p.name for p in positional[count:] if p.default is p.empty]
    if missing:
        raise UsageError(
            f"{where} gives {_counted(count, 'value')}, the model also needs {', '.join(missing)} "
            f"(parameters: {shown}): one value per parameter, in order"
        )
    names = [p.name for p in positional[:count]]
    names += [f"{star.name}_{i}" for i in range(count - len(names))] if star is not None else []
    return names


def _counted(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else word + 's'}"


def _looks_like_keras(model) -> bool:
    """A Keras layer or model, without importing Keras."""
    return any(c.__module__.startswith(("keras", "tf_keras")) and c.__name__ in ("Layer", "Model", "Operation")
               for c in type(model).__mro__)


def _built_inputs(model):
    try:
        return list(model.inputs or [])
    except Exception:  # a subclassed model not built yet has none
        return []


def _load(model, inputs, options: dict, function: str, *extra: str):
    from gradcli.options import LoadOptions

    fields, used = _keywords(function, options, LoadOptions, ("inputs", *extra))
    loading = _build(LoadOptions, fields, used)  # validates before TensorFlow is imported
    from gradcli.analyses.load import load

    try:
        return load(_spec(model, inputs, function), loading)
    except Exception as exc:
        from gradcli.errors import UsageError

        if isinstance(exc, UsageError) and exc.names_parameters:
            raise _respelled(exc, used) from None
        raise


def _names(names):
    """Names as a list: a list, or a string with commas as the command line reads it."""
    if names is None:
        return None
    from gradcli.model.values import parse_names

    return parse_names([names] if isinstance(names, str) else list(names))


def _arrays(values, keyword: str = "VALUE"):
    """Named values as arrays: a dict of arrays, lists, numbers or VALUE strings
    (``"[1, 2]"``, ``"@h.npz:output"``, read as the command line reads them),
    or the command line's ``NAME=VALUE`` strings; arrays keep their dtype."""
    if values is None:
        return None
    import numpy as np

    from gradcli.errors import UsageError
    from gradcli.model.values import parse_assignments, parse_value

    if isinstance(values, str):
        values = [values]
    if isinstance(values, (list, tuple)) and all(isinstance(v, str) for v in values):
        return parse_assignments(values, keyword)
    if not isinstance(values, dict):
        raise UsageError(f"must be a dict name -> value, got {type(values).__name__}", param=keyword)
    return {
        name: parse_value(value, f"{keyword} {name}") if isinstance(value, str) else np.asarray(value)
        for name, value in values.items()
    }
