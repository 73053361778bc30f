"""What a model file defines: its ``model``, its ``inputs``, and where each is defined.

``model_of_module`` turns an imported model file into a ``Model``: a Keras
model through ``keras.keras_file_model``, a plain callable as a function of
its inputs (``calling.Calling``: parameters named like the inputs) and of the
trainable variables it closes over (``variables.expose_weights``), a bijector
through ``bijector.bijector_model``.
``read_inputs`` reads ``inputs`` (a dict, or a callable of a numpy Generator)
as named arrays. Errors point at the user's lines (``definition_site``), and
are raised before the first call: a TypeError from the call would name
gradcli's lines instead.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from gradcli.errors import ModelError
from gradcli.model.bijector import bijector_model, is_bijector
from gradcli.model.calling import Calling, OwnCall, describe_call
from gradcli.model.core import (
    Model, call_model, code_site, first_line, is_keras, normalize_outputs, where_raised,
)
from gradcli.model.keras import keras_file_model
from gradcli.model.paths import relative_path
from gradcli.model.structure import Structure, flat_structure, flatten_inputs
from gradcli.model.values import require_numeric
from gradcli.model.variables import expose_weights  # the file's layers, tf.Modules, tf.Variables


def definition_site(module: ModuleType, path: str, name: str) -> str:
    """``file:line`` where the model file defines ``name``: a function's (or a
    callable object's class's) ``def`` line, else the last top-level statement
    that assigns it; the file alone when neither can be found."""
    site = code_site(getattr(module, name, None))
    if site is not None:
        return site
    try:
        import ast

        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return relative_path(path)
    lines = [
        node.lineno for node in tree.body
        if name in _assigned_names(node)
    ]
    return f"{relative_path(path)}:{lines[-1]}" if lines else relative_path(path)


def _assigned_names(node) -> set[str]:
    import ast

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
    )
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def read_inputs(module, path, rng_seed, required) -> tuple[dict[str, np.ndarray], Structure]:
    """The model file's ``inputs`` as named arrays, nested values flattened to
    their leaves (``structure.flatten_inputs``), and how they nest."""
    raw = getattr(module, "inputs", None)
    if raw is None:
        if required:
            raise ModelError(
                f"{relative_path(path)}: defines no `inputs` (a dict of name -> value, or a "
                "callable taking a numpy Generator)"
            )
        return {}, flat_structure([])
    site = definition_site(module, path, "inputs")
    if callable(raw) and not isinstance(raw, dict):
        if not _takes_one_argument(raw):
            raise ModelError(
                f"{site}: `inputs` must take one argument, a numpy.random.Generator "
                "(def inputs(rng): ...)"
            )
        try:
            raw = raw(np.random.default_rng(rng_seed))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise ModelError(
                f"{where_raised(exc, path)}: {type(exc).__name__} in `inputs`: {first_line(exc)}"
            ) from None
    if not isinstance(raw, dict):
        raise ModelError(f"{site}: `inputs` must be a dict or return one, not {type(raw).__name__}")
    return flatten_inputs(raw, lambda value, name: _to_array(value, name, site), site)


def _takes_one_argument(function) -> bool:
    import inspect

    try:
        inspect.signature(function).bind(None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call decide
        return True
    return True


def _to_array(value: Any, name: str, site: str) -> np.ndarray:
    """A model file's input as an array: real numbers or booleans only
    (``values.require_numeric``), as for values given on the command line."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    try:
        array = np.asarray(value)
    except ValueError:
        raise ModelError(f"{site}: input {name!r} is a ragged array") from None
    return require_numeric(array, f"{site}: input {name!r}", ModelError)


def _check_parameters(target: Callable, names, site: str, inputs_site: str) -> None:
    """Every input must be a parameter of the model function, and every
    parameter without a default must have an input: said before the first call,
    at the user's lines (a TypeError from the call would name gradcli's)."""
    import inspect

    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    takes = ", ".join(sorted(named)) or "no named parameters"
    if not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in parameters):
        for name in names:
            if name not in named:
                raise ModelError(
                    f"{inputs_site}: `inputs` gives {name!r}, which the model function "
                    f"({site}) does not take (it takes: {takes})"
                )
    for p in parameters:
        if p.name in named and p.default is p.empty and p.name not in names:
            raise ModelError(
                f"{site}: the model function needs {p.name!r}, which `inputs` "
                f"({inputs_site}) does not give (it gives: {', '.join(names) or 'nothing'})"
            )


def _plain_function(
    target: Callable, site: str, path: str, calling: Calling, structure: Structure
) -> Callable[[dict], dict]:
    def function(values: dict) -> dict:
        return call_model(target, values, site, path, calling, structure)

    return function


def model_of_module(module: ModuleType, path: str, entry: str | None, rng_seed: int, float64: bool) -> Model:
    """The model an imported model file defines: its ``model`` (or ``entry``)
    at its ``inputs``, with its ``check`` settings; not yet at its final point
    (``loading.load_model`` applies the overrides, ``wrt`` and the dtype)."""
    name = entry or "model"
    target = _target(module, path, entry, name)
    settings = getattr(module, "check", {})
    if not isinstance(settings, dict):
        raise ModelError(f"{relative_path(path)}: `check` must be a dict of option defaults")
    display = f"{relative_path(path)}:{entry}" if entry else relative_path(path)
    raw_inputs, structure = read_inputs(module, path, rng_seed, required=not is_keras(target))
    if is_keras(target):
        if structure.nested:
            raise ModelError(
                f"{definition_site(module, path, 'inputs')}: `inputs` nests values (dicts, lists, "
                "sparse tensors); a Keras model takes its data inputs as arrays"
            )
        model = keras_file_model(target, module, raw_inputs, display, path, float64)
    elif is_bijector(target):  # before callables: a TFP bijector is callable too
        model = bijector_model(
            module, path, definition_site(module, path, name), target, display, raw_inputs, structure)
    elif callable(target):
        model = _callable_model(module, path, name, target, display, raw_inputs, structure)
    else:
        raise ModelError(
            f"{relative_path(path)}: `{name}` is a {type(target).__name__}, not a callable or Keras model"
        )
    model.module = module
    model.settings = dict(settings)
    return model


def _target(module: ModuleType, path: str, entry: str | None, name: str) -> Any:
    """What the file's ``name`` holds; a ModelError listing its callables when it has none."""
    if not hasattr(module, name):
        defined = sorted(
            k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
        )
        if entry is None:
            raise ModelError(
                f"{relative_path(path)}: defines no `model` (a model file must set `model` "
                "to a callable or a Keras model)"
            )
        raise ModelError(
            f"{relative_path(path)}: no name {entry!r} (callables defined: {', '.join(defined) or 'none'})"
        )
    return getattr(module, name)


def _callable_model(
    module: ModuleType, path: str, name: str, target: Callable, display: str,
    raw_inputs: dict[str, np.ndarray], structure: Structure,
) -> Model:
    """A plain callable as a function of its inputs, called with the parameters
    they name (``calling.Calling``), and of the trainable variables it uses."""
    site = definition_site(module, path, name)
    _check_parameters(target, structure.names, site, definition_site(module, path, "inputs"))
    calling = Calling.of(target, structure.names)
    model = Model(
        name=display,
        path=path,
        function=_plain_function(target, site, path, calling, structure),
        point=raw_inputs,
        wrt=[],
        native_dtypes={},
        own_call=OwnCall(
            call=lambda data: normalize_outputs(calling(target, structure.rebuild(data)), site),
            variables={},
            description=describe_call(name, calling),
        ),
        structure=structure,
    )
    model.python_numbers = structure.python_numbers if isinstance(getattr(module, "inputs", None), dict) else []
    expose_weights(model, module, target)
    if not (structure.nested or structure.sparse or structure.complex or getattr(model.function, "variables", ())):
        model.trace_key = (target, calling, tuple(structure.names), tuple(model.point))
    return model
