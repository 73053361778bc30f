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
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import time
from types import ModuleType
from typing import Any, Callable

import numpy as np

from gradcli.errors import GradcliError, ModelError, UsageError
from gradcli.model.calling import Calling, OwnCall, describe_call
from gradcli.model.core import (  # re-exported: the names the rest of gradcli imports from here
    CHECK_DTYPE, Model, call_model, code_site, differentiable, first_cotangents, first_line, host_array,
    is_floating, is_keras, name_list, normalize_outputs, require_finite, run_model,
    weight_name, where_raised,
)
from gradcli.model.keras import keras_file_model, load_keras_file
from gradcli.model.paths import is_saved_model, relative_path, split_spec
from gradcli.model.project import project_folder
from gradcli.model.savedmodel import load_saved_model
from gradcli.model.structure import Structure, flat_structure, flatten_inputs
from gradcli.model.variables import expose_weights  # the file's layers, tf.Modules, tf.Variables
from gradcli.model.values import check_unknown, fit_value, require_numeric
from gradcli.options import LoadOptions
from gradcli.tf_import import import_tensorflow


def import_model_file(path: str) -> ModuleType:
    """Import ``path`` as a fresh module, in isolation; errors name the file and line.

    The file is imported as scripts are run: its folder first on ``sys.path``,
    so it can import its neighbours (``import helpers``); then, as pytest puts
    its rootdir there, the folder of its project (``project.project_folder``:
    the pyproject.toml's folder, else the repository root, else the working
    directory), so ``from models.layers import X`` works from
    ``models/net.py``. Those are its own modules (``own_modules``): a batch
    with two folders that each hold a ``helpers.py`` gives each model file its
    own, and ``sys.path`` and ``sys.modules`` are as before once the import is
    done. A file inside a package (``package_of``: its folder holds
    ``__init__.py``) is imported under its package's name, as pytest does,
    with the folder above the package on ``sys.path`` too, so its relative
    imports (``from .layers import softclip``) work.
    """
    if not os.path.isfile(path):
        raise UsageError(f"no such model file: {path}")
    path = os.path.abspath(path)
    package, above = package_of(path)
    if package:
        module_name = f"{package}.{os.path.splitext(os.path.basename(path))[0]}"
    else:
        module_name = f"gradcli_model_{hashlib.sha1(path.encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folders = [os.path.dirname(path), project_folder(path)] + ([above] if package else [])
    with own_modules(*folders):
        sys.modules[module_name] = module
        try:
            if package:
                importlib.import_module(package)  # its __init__.py files run first, as in Python
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            sys.modules.pop(module_name, None)
            raise ModelError(
                f"{relative_path(exc.filename or path)}:{exc.lineno}: syntax error: {exc.msg}"
            ) from None
        except KeyboardInterrupt:
            sys.modules.pop(module_name, None)
            raise
        except BaseException as exc:  # SystemExit, GeneratorExit, the user's own BaseException
            sys.modules.pop(module_name, None)
            raise ModelError(
                f"{where_raised(exc, path)}: {type(exc).__name__} while importing the model file: {exc}"
            ) from None
    return module


def package_of(path: str) -> tuple[str | None, str | None]:
    """pytest's rule for a file in a package: walk up while the folder holds
    ``__init__.py``; the package is the dotted path from the topmost such
    folder (``models.sub``), imported from the folder above it. ``(None,
    None)`` for a file outside a package, or in a folder whose name is not a
    module name."""
    folder, parts = os.path.dirname(os.path.abspath(path)), []
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent, name = os.path.split(folder)
        if not name.isidentifier() or parent == folder:
            return None, None
        parts.insert(0, name)
        folder = parent
    if not parts or not os.path.splitext(os.path.basename(path))[0].isidentifier():
        return None, None
    return ".".join(parts), folder


def import_modules(names, root: str) -> None:
    """Import each of ``names`` before a model is loaded: a module name
    (``pkg.layers``) importable from ``root`` (the project folder) or the
    installed packages, or a ``.py`` file. Their import registers what a saved
    model needs (``@keras.saving.register_keras_serializable`` classes) in this
    process; ``sys.path`` and ``sys.modules`` are restored as for a model file
    (``own_modules``), the registrations stay. A name that cannot be found is a
    UsageError; an exception raised by the module's code a ModelError at its
    line."""
    for name in names:
        name = str(name)
        is_file = name.endswith(".py") or os.sep in name or "/" in name
        if is_file:
            if not os.path.isfile(name):
                raise UsageError(f"{{@imports}} {name}: no such file")
            import_model_file(name)
            continue
        if not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"{{@imports}} {name}: neither a module name nor a .py file")
        with own_modules(root):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is not None and name.startswith(exc.name):  # the module itself is missing
                    raise UsageError(
                        f"{{@imports}} {name}: no module named {exc.name!r} (looked in "
                        f"{relative_path(root)} and the installed packages)"
                    ) from None
                raise ModelError(f"{where_raised(exc, root)}: ModuleNotFoundError while importing {name}: {exc}") from None
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # the module's own code failed
                raise ModelError(
                    f"{where_raised(exc, root)}: {type(exc).__name__} while importing {name}: {first_line(exc)}"
                ) from None


@contextlib.contextmanager
def own_modules(*folders: str):
    """Run an import with ``folders`` first on ``sys.path`` (in that order) and
    their modules its own (below, ``folder`` is any of them).

    Before: a module of user code (not the standard library or an installed
    package) already imported under a name that ``folder`` provides
    (``helpers.py``, a package ``helpers/``) but loaded from elsewhere is set
    aside, so the import finds the folder's. Standard and installed modules
    stay, as when Python runs a script: a ``types.py`` beside the model must
    not replace the one TensorFlow imports. After: ``sys.path`` is restored,
    the modules the import loaded from ``folder`` leave ``sys.modules`` (the
    model module keeps them through its globals), and those set aside return.
    Packages that were imported before (gradcli itself, when a model file sits
    in its source tree) are shared, not reloaded: two copies of a package
    would make two of each class. A module imported later, while the model
    runs, is not covered: model files import at the top.
    """
    folders = list(dict.fromkeys(os.path.abspath(f) for f in folders))
    saved_path = list(sys.path)
    local = set().union(*(_local_names(f) for f in folders))
    # Installed packages are never the folders' own, even when a virtual
    # environment lies inside the project folder.
    ours = lambda module: any(_comes_from(module, f) for f in folders) and not _installed(module)  # noqa: E731
    set_aside = {
        name: sys.modules.pop(name)
        for name in list(sys.modules)
        if name.partition(".")[0] in local and not ours(sys.modules[name])
        and not _installed(sys.modules[name])
    }
    before = set(sys.modules)
    sys.path[:0] = folders
    try:
        yield
    finally:
        # Before sys.path is restored: a namespace package's path is computed
        # from sys.path, and would no longer name the folders it came from.
        shared = {name.partition(".")[0] for name in before}
        for name in set(sys.modules) - before:
            if name.partition(".")[0] not in shared and ours(sys.modules[name]):
                del sys.modules[name]
        sys.path[:] = saved_path
        sys.modules.update(set_aside)


def _local_names(folder: str) -> set[str]:
    """Top-level module names a folder provides (``helpers.py``, ``pkg/``)."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return set()
    names = set()
    for entry in entries:
        stem, suffix = os.path.splitext(entry)
        if suffix in (".py", ".pyc", ".so", ".pyd"):  # foo.cpython-311-x86_64-linux-gnu.so
            names.add(stem.partition(".")[0])
        elif entry.isidentifier() and os.path.isdir(os.path.join(folder, entry)):
            names.add(entry)
    return names


def _installed(module) -> bool:
    """Built in, or from the standard library or site-packages."""
    import sysconfig

    origin = getattr(module, "__file__", None)
    # A namespace package (a folder without __init__.py) has no file, only its folders.
    places = [origin] if isinstance(origin, str) else [
        p for p in (getattr(module, "__path__", None) or []) if isinstance(p, str)
    ]
    if not places:
        return True
    roots = {os.path.abspath(p) for key, p in sysconfig.get_paths().items()
             if key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return all(any(os.path.abspath(place).startswith(root + os.sep) for root in roots) for place in places)


def _comes_from(module, folder: str) -> bool:
    """Whether ``module`` (or a package's search path) lies in ``folder``."""
    places = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or [])]
    return any(
        isinstance(p, str) and os.path.abspath(p).startswith(folder + os.sep) for p in places
    )


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


def load_model(
    spec: str | ModuleType,
    *,
    wrt: list[str] | None = None,
    overrides: dict[str, np.ndarray] | None = None,
    rng_seed: int = 0,
    float64: bool = True,
    data: dict[str, np.ndarray] | None = None,
    imports: list[str] | None = None,
    loss: str | None = None,
) -> Model:
    """Load a model file (``FILE.py`` or ``FILE.py:NAME``), or a module
    object holding the same names, at its point.

    ``overrides`` replace input values (``--set``); ``rng_seed`` seeds numpy,
    TensorFlow and Keras before the file is imported and is passed to a callable
    ``inputs``, so random weights and inputs are reproducible. With ``float64``
    the floating inputs are promoted to float64; if the model cannot run in
    float64 it runs in its own dtype and a note says so. A saved Keras model
    (``FILE.keras``) or SavedModel folder (``DIR`` or ``DIR:SIGNATURE``) takes
    its data inputs from ``data`` (``--input``); a ``.keras`` file's ``loss``
    (``"compiled"`` or a Keras loss name) makes the checked function that
    loss on the targets ``data["y"]`` (``keras.load_keras_file``).
    ``imports`` (modules importable from the project folder, or ``.py``
    files) are imported first, so that the custom classes they register are
    known when a saved model is deserialized (``import_modules``).
    The options are validated as ``gradcli.options.LoadOptions``.
    """
    LoadOptions(wrt=wrt, overrides=overrides or {}, rng_seed=rng_seed, float64=float64, data=data or {},
                imports=list(imports or []), loss=loss)
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
            return _finish(saved, overrides, wrt, None, float64, rng_seed)
        if data:
            raise UsageError(
                "{@data} gives the data of a .keras or SavedModel MODEL; to change a model "
                "file's inputs use {@overrides}"
            )
        module = import_model_file(path)
    name = entry or "model"
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
    target = getattr(module, name)
    settings = getattr(module, "check", {})
    if not isinstance(settings, dict):
        raise ModelError(f"{relative_path(path)}: `check` must be a dict of option defaults")
    display = f"{relative_path(path)}:{entry}" if entry else relative_path(path)
    raw_inputs, structure = _read_inputs(module, path, rng_seed, required=not is_keras(target))
    file_wrt = getattr(module, "wrt", None)
    if is_keras(target):
        if structure.nested:
            raise ModelError(
                f"{definition_site(module, path, 'inputs')}: `inputs` nests values (dicts, lists, "
                "sparse tensors); a Keras model takes its data inputs as arrays"
            )
        model = keras_file_model(target, module, raw_inputs, display, path, float64)
    elif callable(target):
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
    else:
        raise ModelError(
            f"{relative_path(path)}: `{name}` is a {type(target).__name__}, not a callable or Keras model"
        )
    model.module = module
    model.settings = dict(settings)
    model = _finish(model, overrides, wrt, file_wrt, float64, rng_seed)
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


def _finish(model: Model, overrides, wrt, file_wrt, float64: bool, rng_seed: int = 0) -> Model:
    """Apply ``--set``, choose what to differentiate, and run the forward pass once."""
    _apply_overrides(model, overrides or {})
    model.native_dtypes = {n: v.dtype for n, v in model.point.items()}
    model.wrt = _choose_wrt(model, wrt, file_wrt)
    _check_finite_inputs(model)
    _settle_dtype(model, float64, rng_seed)
    return model


def seed_everything(seed: int) -> None:
    tf = import_tensorflow()

    np.random.seed(seed)
    tf.random.set_seed(seed)
    try:
        import keras

        # Fresh Keras name counters, so a model's weights are named the same
        # (dense/kernel, not dense_2/kernel) whatever was loaded before in this process.
        keras.backend.clear_session(free_memory=False)
        keras.utils.set_random_seed(seed)
    except Exception:  # keras absent or older: TF and numpy are seeded already
        pass


def _read_inputs(module, path, rng_seed, required) -> tuple[dict[str, np.ndarray], Structure]:
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


def _apply_overrides(model: Model, overrides: dict[str, np.ndarray]) -> None:
    overrides = _complex_overrides(model, overrides)
    for name in overrides:
        leaves = _leaves_under(model, name)
        if leaves:
            raise UsageError(
                f"{{@overrides}} {name}: a nested input; set its leaves ({name_list(leaves)})"
            )
    check_unknown(overrides, model.point, "input for {@overrides}")
    for name, value in overrides.items():
        model.point[name] = fit_value(value, model.point[name], f"{{@overrides}} {name}")


def _choose_wrt(model: Model, cli_wrt, file_wrt) -> list[str]:
    """What to differentiate: exactly the names ``wrt`` lists (``--wrt``, else
    the model file's ``wrt``); by default every floating input and every
    trainable weight, the targets of a loss aside (``Model.targets``). The
    gradient with respect to a Keras model's data is what backpropagation
    carries through it to the layers before it, so it is checked like its
    weights'. A SavedModel's default stays its weights. A note says what the
    default chose when the model has weights."""
    if cli_wrt:
        names, source, error = list(cli_wrt), "{@wrt}", UsageError
    elif file_wrt:
        names, source, error = list(file_wrt), f"{relative_path(model.path)}: `wrt`", ModelError
    if cli_wrt or file_wrt:  # a nested input (``params``) stands for its leaves
        names = list(dict.fromkeys(leaf for n in names for leaf in (_leaves_under(model, n) or [n])))
    else:
        names = [n for n, v in model.point.items() if is_floating(v) and n not in model.targets]
        if model.kind == "savedmodel":
            names = list(model.weights)
        if not names:
            described = ", ".join(f"{n} ({v.dtype})" for n, v in model.point.items())
            raise ModelError(
                f"{model.name}: nothing floating to differentiate (inputs: {described or 'none'})"
            )
        empty = [n for n in names if np.size(model.point[n]) == 0]
        names = [n for n in names if n not in empty]
        if not names:
            shapes = ", ".join(f"{n} shape {list(np.shape(model.point[n]))}" for n in empty)
            raise ModelError(
                f"{model.name}: nothing to differentiate: every floating input has no elements ({shapes})"
            )
        if empty:
            model.notes.append(f"{', '.join(empty)}: no elements (shape [0]), not differentiated")
        if model.weights and model.kind != "savedmodel":
            model.notes.append(_default_wrt_note(model, names))
        return names
    for name in names:
        if name not in model.point:
            raise error(
                f"{source}: unknown input {name!r} (known: {', '.join(model.point)})"
            )
        if not is_floating(model.point[name]):
            raise error(
                f"{source}: input {name!r} is {model.point[name].dtype}; only "
                "floating-point inputs can be differentiated"
            )
        if np.size(model.point[name]) == 0:
            raise error(
                f"{source}: input {name!r} has no elements (shape "
                f"{list(np.shape(model.point[name]))}): nothing to differentiate"
            )
    return names


def _complex_overrides(model: Model, overrides: dict) -> dict:
    """A complex value set on a complex input (``--set z=@z.npy``) is its two
    leaves' values, ``z.real`` and ``z.imag`` (``structure``); a real value
    there sets the real part with the imaginary part zero."""
    complex_inputs = getattr(model.structure, "complex", None) or {}
    split = {}
    for name, value in overrides.items():
        if name in complex_inputs:
            real, imag = complex_inputs[name]
            value = np.asarray(value)
            split[real], split[imag] = np.real(value), np.imag(value)
        else:
            split[name] = value
    return split


def _leaves_under(model: Model, name: str) -> list[str]:
    """The leaves of the nested input ``name`` (``params`` -> ``params.w``,
    ``params.b``); [] when it is not one."""
    if model.structure is None or name in model.point:
        return []
    return model.structure.leaves_under(name)


def _default_wrt_note(model: Model, names: list[str]) -> str:
    """``differentiated with respect to input x and 4 weights (...)``: what the default
    chose, and what it left out."""
    data = [n for n in names if n not in model.weights]
    weights = [n for n in names if n in model.weights]
    parts = [f"{'input' if len(data) == 1 else 'inputs'} {name_list(data)}"] if data else []
    if weights:
        parts.append(f"{len(weights)} {'weight' if len(weights) == 1 else 'weights'}")
    left = [f"the targets {', '.join(model.targets)}"] if model.targets else []
    return (
        f"differentiated with respect to {' and '.join(parts)} (every floating input and trainable weight"
        f"{', not ' + ', '.join(left) if left else ''}; `wrt` narrows)"
    )


def _check_finite_inputs(model: Model) -> None:
    require_finite(model.name, "input", model.point, "; gradients need a finite point")


def _settle_dtype(model: Model, float64: bool, rng_seed: int = 0) -> None:
    """Promote floating inputs to float64 and run the forward pass once.

    Rule: check in float64 whenever the model runs in it, because float32
    round-off (about 1e-7 relative, amplified by 1/h in a difference quotient)
    would otherwise swamp the errors we look for. "Runs" means both passes: a
    model whose forward pass raises in float64 (e.g. it mixes in float32
    constants), or whose gradient raises in float64 where it does not in the
    model's own dtypes (a TensorFlow gradient kernel that accepts float32 only,
    such as ScaleAndTranslateGrad behind ``tf.image.resize`` with lanczos or
    antialiasing; ``_float64_gradient_failure``, one reverse-mode product each),
    runs in its own dtypes, with a note naming the op, and the tolerances
    follow that dtype (``compare.DEFAULT_TOLERANCES``).

    Inputs written as Python numbers (``inputs = {"x": [1.0, 2.0]}``,
    ``Model.python_numbers``) have no dtype of their own: numpy reads them as
    float64, TensorFlow as float32 (``tf.constant([1.0])``). They are checked
    in float64 like the rest; when the model does not run in float64 (a float32
    constant meets them), their own dtype is TensorFlow's, float32, and they
    are routed as float32 arrays are, with a note (``_as_python_floats``).
    """
    native = dict(model.point)
    changed = [n for n in model.wrt if native[n].dtype != CHECK_DTYPE]
    written = [n for n in model.wrt if n in model.python_numbers and native[n].dtype == CHECK_DTYPE]
    own = {n: d for n, d in model.own_dtypes.items() if n in native and native[n].dtype != d}
    if float64 and model.runs_in_float64:
        promoted = {
            n: (v.astype(CHECK_DTYPE) if is_floating(v) else v) for n, v in native.items()
        }
        try:
            model.outputs, model.point = _forward(model, promoted), promoted
            failure = _float64_gradient_failure(model, native, rng_seed) if changed else None
        except ModelError as exc:
            if not changed and not written and not own:
                raise
            reason = str(exc).split(': ', 1)[-1]
            if written:
                native, written = _as_python_floats(model, native, written, reason), []
                if not changed:  # only they change: float32 must run, else the float64 error stands
                    try:
                        model.outputs, model.point = _forward(model, native), native
                    except ModelError:
                        raise exc from None
                    return _check_finite_outputs(model)
            else:
                native = _as_own_dtypes(model, native, own)
                model.notes.append(
                    f"the model does not run in float64 ({reason}); checking in "
                    f"{native[(changed or list(own))[0]].dtype} with steps and tolerances for that dtype"
                )
        else:
            if failure is None:
                if changed:
                    model.notes.append(
                        f"promoted {name_list(changed)} from "
                        f"{native[changed[0]].dtype} to float64 for checking"
                    )
                return _check_finite_outputs(model)
            model.notes.append(
                f"the gradient does not run in float64 ({failure}); checking in "
                f"{native[changed[0]].dtype} with steps and tolerances for that dtype"
            )
    try:
        model.outputs, model.point = _forward(model, native), native
    except ModelError as exc:  # float64 Python numbers beside float32 constants: TensorFlow's float32
        if not written:
            raise
        native = _as_python_floats(model, native, written, str(exc).split(': ', 1)[-1])
        try:
            model.outputs, model.point = _forward(model, native), native
        except ModelError:
            raise exc from None
    _check_finite_outputs(model)


def _as_own_dtypes(model: Model, values: dict, own: dict) -> dict:
    """``values`` with the inputs the model converts itself (``Model.own_dtypes``:
    float64 data of a float32 Keras model) in the dtype it converts them to,
    which becomes their own dtype, with a note (``_settle_dtype``)."""
    if not own:
        return values
    model.native_dtypes.update(own)
    names = list(own)
    model.notes.append(
        f"{name_list(names)} {'is' if len(names) == 1 else 'are'} given as {values[names[0]].dtype}; "
        f"the model converts {'it' if len(names) == 1 else 'them'} to {own[names[0]]} when called, "
        "its own dtype"
    )
    return {**values, **{n: values[n].astype(d) for n, d in own.items()}}


def _as_python_floats(model: Model, values: dict, written: list[str], reason: str) -> dict:
    """``values`` with the inputs ``written`` as Python numbers in float32, the
    dtype TensorFlow gives Python floats, which becomes their own dtype
    (``Model.native_dtypes``), with a note saying why (``_settle_dtype``)."""
    model.native_dtypes.update({n: np.dtype(np.float32) for n in written})
    model.notes.append(
        f"the model does not run in float64 ({reason}); {name_list(written)} "
        f"{'is' if len(written) == 1 else 'are'} written as Python numbers: checking in float32, "
        "TensorFlow's dtype for them, with steps and tolerances for that dtype"
    )
    return {**values, **{n: values[n].astype(np.float32) for n in written}}


def _reverse_product(model: Model, values: dict, cotangents: dict) -> tuple[BaseException | None, dict | None]:
    """One reverse-mode product at ``values`` (an eager tape, every floating
    output seeded with its cotangent), as a training step takes it: (the
    exception a gradient raised, None) or (None, the product)."""
    from gradcli.numerics import autodiff

    if not cotangents or not model.wrt:
        return None, None  # nothing to differentiate: no gradient to raise
    try:
        return None, autodiff.vjp(model.function, values, list(model.wrt), cotangents)
    except (GradcliError, KeyboardInterrupt):
        raise
    except Exception as exc:  # whatever the gradient raised: compared below
        return exc, None


def _float64_gradient_failure(model: Model, native: dict, rng_seed: int = 0) -> str | None:
    """Why the reverse pass fails in float64 but not in the model's own dtypes
    (``_settle_dtype``): "Op 'name' at file:line: its gradient raised ...", or
    None when it runs in float64 or fails in both (then it is the model's
    error, reported by the check). Costs one reverse-mode product at the
    promoted point, and one more at the native point only when that fails.
    The product is taken with the proof's cotangents (``first_cotangents``)
    and kept (``Model.taken_vjp``): the proof, the gradient-path rule and the
    first probe reuse it (on a ResNet-50 each such pass is about 0.8 s)."""
    cotangents = first_cotangents(model.outputs, rng_seed)
    failure, product = _reverse_product(model, model.point, cotangents)
    if failure is None:
        if product is not None:
            model.taken_vjp = (model.point, cotangents, product)
        return None
    if _reverse_product(model, native, cotangents)[0] is not None:
        return None
    return _describe_gradient_failure(model, failure)


def _describe_gradient_failure(model: Model, exc: BaseException) -> str:
    """The forward op whose own gradient raises in float64, with its model-file
    line, found by building each op's gradient in the traced float64 graph
    (``verdicts.culprit.ModelGraph``); else the op TensorFlow's message names."""
    import re

    first = first_line(exc)
    first = re.sub(r"\s*\[Op:\w+\].*", "", first).strip()
    named = getattr(getattr(exc, "op", None), "type", None)
    if named is None:
        found = re.search(r"\[Op:(\w+)\]", str(exc))
        named = found.group(1) if found else None
    why = f"{type(exc).__name__}{f' in {named}' if named else ''}: {first}"
    try:
        site = _failing_gradient_site(model)
    except Exception:  # graph analysis is a bonus: TensorFlow's own words stay
        site = None
    return f"{site}: its gradient raised {why}" if site else f"the gradient raised {why}"


def _failing_gradient_site(model: Model) -> str | None:
    """``Op 'name' at file:line`` of the first op, in graph order, whose own
    registered gradient cannot be built at the model's (float64) point."""
    from gradcli.numerics.autodiff import graph_gradients
    from gradcli.verdicts.culprit import ModelGraph

    graph = ModelGraph(model)
    if not graph._trace():
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


#: Two evaluations at the same point may differ by this many ulps (reduction
#: order) before the forward pass counts as nondeterministic; finite differences
#: assume about as much round-off (``finite_diff.ROUNDOFF_ULPS``).
REPEAT_ULPS = 8


def _forward(model: Model, values: dict) -> dict[str, np.ndarray]:
    """Run the forward pass twice: differencing a random function (dropout,
    unseeded random ops) would report noise as gradient errors."""
    first = {n: host_array(t) for n, t in run_model(model, values).items()}
    started = time.perf_counter()
    again = {n: host_array(t) for n, t in run_model(model, values).items()}
    model.forward_seconds = time.perf_counter() - started  # the second call: state built by the first
    for name, a in first.items():
        b = again.get(name)
        if not is_floating(a) or b is None or a.shape != b.shape:
            continue
        eps = np.finfo(a.dtype).eps
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        close = np.abs(a - b) <= REPEAT_ULPS * eps * np.maximum(np.abs(a), np.abs(b))
        changed = ~(same | close)
        if changed.any():
            index = [int(i) for i in np.argwhere(changed)[0]] if a.ndim else []
            where = f"{name}[{', '.join(map(str, index))}]" if index else name
            raise ModelError(
                f"{model.name}: the forward pass is nondeterministic: output {where} was "
                f"{a[tuple(index)]:.7g}, then {b[tuple(index)]:.7g} at the same point "
                "(dropout or unseeded random ops?); gradients cannot be checked"
            )
    return first


def _check_finite_outputs(model: Model) -> None:
    require_finite(model.name, "output", model.outputs, " at the given point")


def _plain_function(
    target: Callable, site: str, path: str, calling: Calling, structure: Structure
) -> Callable[[dict], dict]:
    def function(values: dict) -> dict:
        return call_model(target, values, site, path, calling, structure)

    return function




