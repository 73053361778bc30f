"""Model paths: as messages show them, as arguments spell them, and folders expanded.

Numpy, os and pathlib only: no TensorFlow, no model loading.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from gradcli.errors import UsageError
from gradcli.model.ignore import GitIgnore, decide, parse


def relative_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def split_spec(spec: str) -> tuple[str, str | None]:
    """``FILE.py:NAME`` -> (FILE.py, NAME); a plain path -> (path, None)."""
    if not os.path.exists(spec) and ":" in spec:
        path, entry = spec.rsplit(":", 1)
        if entry.isidentifier():
            return path, entry
    return spec, None

#: The file that makes a folder a SavedModel.
SAVED_MODEL_FILE = "saved_model.pb"


def is_saved_model(path: str) -> bool:
    """A folder holding ``saved_model.pb`` (no TensorFlow)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))


#: Files of a folder that are never model files: pytest's per-folder plugin.
NOT_MODELS = ("conftest.py",)


#: Folders a folder walk never enters, as ruff and pytest skip them: virtual
#: environments and installed packages (also any folder holding ``pyvenv.cfg``),
#: caches and build output. Hidden folders (``.name``) are skipped as well.
SKIP_FOLDERS = (
    "venv", "site-packages", "__pycache__", "__pypackages__", "node_modules",
    "build", "dist", "_build", "buck-out",
)
#: Why a file found in a folder is not checked, as (one file, several files).
NO_MODEL = ("defines no `model`", "define no `model`")
GITIGNORE = ("excluded by .gitignore", "excluded by .gitignore")
EXCLUDED = ("matches an exclude pattern", "match an exclude pattern")
NOT_INCLUDED = ("matches no include pattern", "match no include pattern")
REASONS = (NO_MODEL, GITIGNORE, EXCLUDED, NOT_INCLUDED)  # the note's order


@dataclass
class Collected:
    """The model files a batch of MODEL arguments stands for, and the files a
    folder held that are not checked, with the reason (``NO_MODEL``, ...)."""

    specs: list[str] = field(default_factory=list)
    skipped: list[tuple[str, tuple[str, str]]] = field(default_factory=list)

    @property
    def note(self) -> str | None:
        """``skipped 3 files: 2 define no `model`, 1 excluded by .gitignore``."""
        if not self.skipped:
            return None
        counts = Counter(reason for _, reason in self.skipped)
        parts = [f"{counts[r]} {r[0] if counts[r] == 1 else r[1]}" for r in REASONS if counts[r]]
        files = "1 file" if len(self.skipped) == 1 else f"{len(self.skipped)} files"
        return f"skipped {files}: {', '.join(parts)}"


def expand_models(paths, *, include=(), exclude=()) -> list[str]:
    """The model files of ``paths`` (``collect_models``), without the skipped ones."""
    return collect_models(paths, include=include, exclude=exclude).specs


def collect_models(paths, *, include=(), exclude=()) -> Collected:
    """Model arguments as files, each once, collected by one rule:

    * a folder stands for the ``*.py`` model files below it (sorted, subfolders
      included), unless it is a SavedModel. The walk skips hidden folders,
      virtual environments, caches and build output (``SKIP_FOLDERS``),
      SavedModel folders, and what the project's ``.gitignore`` files ignore
      (``ignore.GitIgnore``, read from the project folder,
      ``project.project_folder``, down). Of the files, it leaves out private
      ones (``_helpers.py``, ``__init__.py``), hidden ones and editor lock links
      (``.#name.py``), ``conftest.py``, and names that are not a readable file
      (dangling links, folders named ``x.py``); then, each with its reason in
      ``Collected.skipped``, files ignored by git, files matching an ``exclude``
      pattern or no ``include`` pattern (``ignore.Pattern``: git's glob
      rules), and files that define no ``model`` (``defines_model``: read,
      not run). A folder that leaves none is a usage error;
    * a file or folder named explicitly is taken as it is: include, exclude and
      ``.gitignore`` apply to what a folder walk finds, and a named file that
      defines no ``model`` is an error when it is loaded. A missing path with
      no file suffix, or ending in a slash, is a missing folder;
    * each path is spelled once, without ``.`` parts or doubled slashes
      (``./a.py`` is ``a.py``; ``..`` is kept, since a link before it may point
      elsewhere);
    * a file named twice (``a.py``, ``./a.py``, a link to it, the file inside
      its folder) is kept at its first mention, so it is checked once and lands
      in one shard. ``FILE.py:NAME`` entries of one file are distinct models;
    * a path that does not exist is a usage error (``no such model file``, or
      ``no such folder``), raised here, before anything is loaded.

    ``include`` and ``exclude`` are ``ignore.Pattern`` objects (anchored
    where they were written: ``patterns``).
    """
    collected, seen = Collected(), set()
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path) and not is_saved_model(path):
            walk = _Walk(path, include, exclude)
            found = walk.files()
            collected.skipped += walk.skipped
            if not found:
                note = Collected(skipped=walk.skipped).note
                raise UsageError(
                    f"no *.py model files in folder {path}" + (f" ({note})" if note else "")
                )
        else:
            file = split_spec(path)[0]
            if not os.path.lexists(file):  # before any model loads (and TensorFlow with it)
                if names_a_folder(path):
                    raise UsageError(f"no such folder: {path}")
                raise UsageError(f"no such model file: {file}")
            found = [path]
        for spec in found:
            spec = spelled(spec)
            key = _identity(spec)
            if key not in seen:
                seen.add(key)
                collected.specs.append(spec)
    return collected


def patterns(globs, base: str) -> list:
    """``include``/``exclude`` globs (git's rules) anchored at ``base``."""
    found = [parse(glob, base) for glob in globs]
    return [p for p in found if p is not None]


def names_a_folder(path: str) -> bool:
    """A path that can only mean a folder: a trailing slash, or no suffix."""
    file, _ = split_spec(path)
    return file.endswith(("/", os.sep)) or not os.path.splitext(os.path.basename(file))[1]


class _Walk:
    """The model files below one folder (``collect_models``)."""

    def __init__(self, folder: str, include, exclude):
        from gradcli.model.project import project_folder

        self.folder, self.include, self.exclude = folder, list(include), list(exclude)
        top = os.path.abspath(folder)
        root = project_folder(top)
        if os.path.commonpath([top, root]) != root:
            root = top  # a folder outside the project reads its own .gitignore files
        self.gitignore = GitIgnore(root)
        self.skipped: list[tuple[str, tuple[str, str]]] = []
        self._visited: set[str] = set()

    def files(self) -> list[str]:
        return self._walk(self.folder)

    def _walk(self, folder: str) -> list[str]:
        real = os.path.realpath(folder)
        if real in self._visited:  # a link back up the tree
            return []
        self._visited.add(real)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return []
        found = []
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                if not self._skip_folder(path, name):
                    found += self._walk(path)
            elif _model_file(folder, name):
                reason = self._reason(path)
                if reason is None:
                    found.append(path)
                else:
                    self.skipped.append((path, reason))
        return found

    def _skip_folder(self, path: str, name: str) -> bool:
        absolute = os.path.abspath(path)
        return (
            name.startswith(".") or name in SKIP_FOLDERS or name.endswith(".egg-info")
            or os.path.isfile(os.path.join(path, "pyvenv.cfg")) or is_saved_model(path)
            or self.gitignore.ignored(absolute, True)
            or decide(self.exclude, absolute, True) is not None
        )

    def _reason(self, path: str):
        absolute = os.path.abspath(path)
        if self.gitignore.ignored(absolute, False):
            return GITIGNORE
        if decide(self.exclude, absolute, False) is not None:
            return EXCLUDED
        if self.include and not _included(self.include, absolute):
            return NOT_INCLUDED
        if not defines_model(path):
            return NO_MODEL
        return None


def _model_file(folder: str, name: str) -> bool:
    return (
        name.endswith(".py") and not name.startswith(("_", ".")) and name not in NOT_MODELS
        and os.path.isfile(os.path.join(folder, name))
    )


def _included(include, path: str) -> bool:
    """The last ``include`` pattern that matches the file ``path``, else the
    nearest folder holding it, includes it (``!`` patterns take out again)."""
    is_dir, place = False, path
    while True:
        last = None
        for pattern in include:
            if pattern.matches(place, is_dir):
                last = pattern
        if last is not None:
            return not last.negated
        parent = os.path.dirname(place)
        if parent == place:
            return False
        is_dir, place = True, parent


def defines_model(path: str, name: str = "model") -> bool:
    """Whether the model file ``path`` defines ``name`` at its top level,
    decided by reading its code, not running it: an assignment (also by
    unpacking, ``with ... as``, ``for``, ``:=``), a ``def``/``class``, or an
    import binding the name, at module level or inside module-level ``if``,
    ``try``, ``with`` and loops. When the code could bind it in a way reading
    cannot tell (``from x import *``, ``globals()``, ``exec``, ``setattr``, a
    module ``__getattr__``) or cannot be read (a syntax error, which the
    loader then reports), the answer is True: such a file is loaded."""
    import ast

    try:
        with open(path, "rb") as source:
            tree = ast.parse(source.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return True
    nodes = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in (name, "__getattr__"):
                return True
            nodes += node.decorator_list  # the body binds names of its own scope
            continue
        if isinstance(node, ast.Lambda) or (isinstance(node, ast.AnnAssign) and node.value is None):
            continue  # a lambda's own scope; `model: T` declares without binding
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.partition(".")[0]) == name or a.name == "*" for a in node.names):
                return True
            continue
        if isinstance(node, ast.Name) and (
            (node.id == name and isinstance(node.ctx, ast.Store))
            or node.id in ("globals", "exec", "setattr", "vars")
        ):
            return True
        if isinstance(node, ast.ExceptHandler) and node.name == name:
            return True
        nodes += ast.iter_child_nodes(node)
    return False


def spelled(spec: str) -> str:
    """``spec`` without ``.`` parts, doubled or trailing slashes."""
    import pathlib

    path, entry = _split(spec)
    text = os.fspath(pathlib.PurePath(path)) if path else path
    return text if entry is None else f"{text}:{entry}"


def _identity(spec: str):
    """What makes two spellings one model: the real file and the entry name."""
    path, entry = _split(spec)
    return (os.path.realpath(path) if os.path.exists(path) else path, entry)


def _split(spec: str) -> tuple[str, str | None]:
    return split_spec(spec)


def shard_models(specs: list[str], index: int, count: int) -> list[str]:
    """Shard ``index`` of ``count`` (1-based) of a batch, for CI matrix jobs.

    The rule: sort the models by normalised path, then deal them round robin,
    shard k taking positions k-1, k-1+count, ... of the sorted list. Every model
    lands in exactly one shard whatever order the arguments came in, shard sizes
    differ by at most one, and no hash is involved, so a job's list can be
    predicted by reading the folder. The shard keeps the sorted order.
    """
    if not 1 <= index <= count:
        raise UsageError(f"must be K/N with 1 <= K <= N, got {index}/{count}", param="shard")
    ordered = sorted(specs, key=lambda spec: (os.path.normpath(spec), spec))
    return ordered[index - 1::count]
