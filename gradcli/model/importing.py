"""Import a model file, and the modules a saved model needs, as scripts are run.

A model file is imported as Python runs a script: its folder first on
``sys.path``, then its project's folder (``project.project_folder``), so it
imports its neighbours and its project's packages. The import leaves no trace
(``own_modules``): ``sys.path`` and ``sys.modules`` are as before, so two
model files that each hold a ``helpers.py`` each get their own. Errors name
the user's file and line (``core.where_raised``), never gradcli's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import sys
from types import ModuleType

from gradcli.errors import ModelError, UsageError
from gradcli.model.core import first_line, where_raised
from gradcli.model.paths import relative_path
from gradcli.model.project import project_folder


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
    # Decided for every module before any leaves: a namespace package's path
    # is computed from its parent's entry in sys.modules, so asking about
    # ``tests.models`` after ``tests`` was set aside raised KeyError: 'tests'
    # (a test that imported one fixture, then checked a model in a folder
    # holding a ``tests`` folder).
    aside = [name for name in list(sys.modules)
             if name.partition(".")[0] in local and not ours(sys.modules[name])
             and not _installed(sys.modules[name])]
    set_aside = {name: sys.modules.pop(name) for name in aside}
    before = set(sys.modules)
    sys.path[:0] = folders
    no_bytecode_before = sys.dont_write_bytecode
    sys.dont_write_bytecode = no_bytecode_before or bytecode_would_be_cut()
    try:
        yield
    finally:
        sys.dont_write_bytecode = no_bytecode_before
        # Before sys.path is restored: a namespace package's path is computed
        # from sys.path, and would no longer name the folders it came from.
        shared = {name.partition(".")[0] for name in before}
        loaded = [name for name in set(sys.modules) - before
                  if name.partition(".")[0] not in shared and ours(sys.modules[name])]
        for name in loaded:  # decided first, as above
            del sys.modules[name]
        sys.path[:] = saved_path
        sys.modules.update(set_aside)


def bytecode_would_be_cut() -> bool:
    """Whether this process has a finite file-size limit (``ulimit -f``).
    CPython's bytecode cache writes a ``.pyc`` with one unchecked write and
    renames it into place, so past the limit a cut ``.pyc`` stays in
    ``__pycache__`` with a valid header, and every later import of its module,
    in any process, fails ("EOFError: marshal data too short") until it is
    deleted."""
    try:
        import resource
    except ImportError:  # no such limit where there is no resource module
        return False
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return soft != resource.RLIM_INFINITY


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
    origin = getattr(module, "__file__", None)
    # A namespace package (a folder without __init__.py) has no file, only its folders.
    places = [origin] if isinstance(origin, str) else [
        p for p in (getattr(module, "__path__", None) or []) if isinstance(p, str)
    ]
    if not places:
        return True
    roots = _installed_roots()
    return all(any(os.path.abspath(place).startswith(root + os.sep) for root in roots) for place in places)


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    """The standard library's and site-packages' folders (read once: every
    import asks about each module of gradcli's and the project's own)."""
    import sysconfig

    return tuple({os.path.abspath(p) for key, p in sysconfig.get_paths().items()
                  if key in ("stdlib", "platstdlib", "purelib", "platlib")})


def _comes_from(module, folder: str) -> bool:
    """Whether ``module`` (or a package's search path) lies in ``folder``."""
    places = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or [])]
    return any(
        isinstance(p, str) and os.path.abspath(p).startswith(folder + os.sep) for p in places
    )
