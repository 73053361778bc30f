"""The package's structure, held to the rules docs/architecture.md states.

Each rule is checked on the syntax tree of every module of ``gradcli/``: no
module runs. A failure lists every place that breaks the rule, file and line.
"""

from __future__ import annotations

import ast
import re
import tokenize
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gradcli"

#: A module longer than this holds more than one idea (issue 29).
MODULE_LINES = 800
#: A function longer than this does more than one step.
FUNCTION_LINES = 100
#: Packages that compute: they raise ``UsageError`` naming a parameter
#: (``{@name}``, ``param=``), and the command line or the API words it.
COMPUTING = ("analyses", "verdicts", "numerics", "model")
#: A command-line flag inside a string.
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
#: The fields of a result that carry its verdict.
VERDICT_FIELDS = ("verdict", "failed", "explanation")


@cache
def modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = (path, ast.parse(path.read_text()))
    return found


def where(path: Path, node) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"


def imported(name: str, path: Path, node) -> list[tuple[str, str | None]]:
    """(module, name imported from it or None) for one import statement,
    function-level ones included, resolved to gradcli's own modules."""
    known = modules()
    if isinstance(node, ast.Import):
        targets = [(alias.name, None) for alias in node.names]
    else:
        if node.level:
            base = name.split(".")
            if path.name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        targets = [
            (f"{module}.{alias.name}", None) if f"{module}.{alias.name}" in known else (module, alias.name)
            for alias in node.names
        ]
    resolved = []
    for module, what in targets:
        while module not in known and "." in module:
            module = module.rsplit(".", 1)[0]
        if module in known and module != name:
            resolved.append((module, what))
    return resolved


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for name, (path, tree) in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {module for module, _ in imported(name, path, node)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """Function-level imports count: a lazy import hides a circle, it does not cut it."""
    assert circles(import_graph()) == []


#: What each part of the package may import (docs/architecture.md says why):
#: the parts form layers, each importing only parts below it. Modules at the
#: top of the package are parts of their own (``config``, ``options``...);
#: ``(api)`` is ``gradcli/__init__.py``.
MAY_IMPORT = {
    "errors": set(),
    "tf_import": set(),
    "progress": set(),
    "memory": {"errors"},
    "results": {"errors"},
    "options": {"errors", "results"},
    "numerics": {"errors", "progress", "results", "tf_import"},
    "model": {"errors", "numerics", "options", "results", "tf_import"},
    "config": {"errors", "model", "options"},
    "verdicts": {"errors", "model", "numerics", "results", "tf_import"},
    "analyses": {"config", "errors", "memory", "model", "numerics", "options", "progress", "results",
                 "tf_import", "verdicts"},
    "workers": {"analyses", "errors", "options", "progress", "results", "tf_import"},
    "render": {"errors", "model", "progress", "results"},
    "(api)": {"analyses", "errors", "model", "options", "results", "workers"},
    "testing": {"(api)", "render", "results"},
    "cli": {"(api)", "config", "errors", "memory", "model", "options", "progress", "render", "results",
            "tf_import", "workers"},
    "pytest_plugin": {"cli", "errors", "model", "render", "results", "workers"},
    "__main__": {"cli"},
}


def part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(api)"


def test_each_part_imports_only_the_parts_below_it():
    """Function-level imports count. ``model`` decides the dtype a model is
    checked in but never judges (``analyses.load`` hands it the verdicts'
    account of a failing float64 gradient); ``analyses`` never starts a
    worker; ``render`` reads results and computes nothing."""
    found = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if part(target) != part(module) and part(target) not in MAY_IMPORT.get(part(module), set())
    )
    assert found == []


def test_no_module_is_over_800_lines():
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path, _ in modules().values()
        if (n := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_100_lines():
    long = [
        f"{where(path, node)} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for path, tree in modules().values()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > FUNCTION_LINES
    ]
    assert long == []


def test_no_private_name_is_imported_across_modules():
    found = [
        f"{where(path, node)} {what} from {module}"
        for name, (path, tree) in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for module, what in imported(name, path, node)
        if what and what.startswith("_") and not what.startswith("__")
    ]
    assert found == []


def test_no_private_attribute_of_a_gradcli_module_or_class_is_used_from_outside():
    """``module._name`` of an imported gradcli module, and ``obj._name`` where
    ``_name`` is a method of a class of another gradcli module (``super()`` too):
    a private method called from another module is part of its interface."""
    methods: dict[str, set[str]] = {}
    for name, (_, tree) in modules().items():
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef):
                for node in cls.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
                        methods.setdefault(node.name, set()).add(name)
    found = []
    for name, (path, tree) in modules().items():
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias, (module, what) in zip(node.names, imported(name, path, node)):
                    if what is None:
                        aliases.add(alias.asname or alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.asname or alias.name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            of_module = isinstance(owner, ast.Name) and owner.id in aliases
            owners = methods.get(node.attr, set())
            if of_module or (owners and name not in owners):
                found.append(f"{where(path, node)} {ast.unparse(node)}")
    assert found == []


def test_verdicts_are_set_only_inside_the_verdicts_package():
    """A pair's verdict, its failing flag and its explanation are assigned in
    ``gradcli/verdicts/`` alone: one place decides and words a verdict."""
    found = []
    for name, (path, tree) in modules().items():
        if name.startswith("gradcli.verdicts"):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in [t for target in targets for t in ast.walk(target)]:  # a, b = ... too
                if isinstance(target, ast.Attribute) and target.attr in VERDICT_FIELDS:
                    found.append(f"{where(path, node)} {ast.unparse(target)} =")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("PairResult", "LayerResult")):
                for keyword in node.keywords:
                    if keyword.arg in VERDICT_FIELDS:
                        found.append(f"{where(path, node)} {ast.unparse(node.func)}({keyword.arg}=...)")
    assert found == []


def test_no_cli_flag_is_spelled_in_the_computing_packages():
    """``analyses``, ``verdicts``, ``numerics`` and ``model`` are called from the
    command line and from the Python API alike: a message names a parameter as
    ``{@name}`` (``gradcli.errors.GradcliError``), which the command line spells
    as its flag (``--wrt``) and the API as its keyword (``wrt=``). A flag
    written there would be wrong for every API caller; docstrings and comments
    say "the ``wrt`` option" too."""
    found = []
    for name, (path, tree) in modules().items():
        if name.split(".")[1:2] and name.split(".")[1] in COMPUTING:
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found += [f"{where(path, node)} {flag}" for flag in FLAG.findall(node.value)]
            with open(path, "rb") as source:
                for token in tokenize.tokenize(source.readline):
                    if token.type == tokenize.COMMENT:
                        found += [f"{path.relative_to(PACKAGE.parent)}:{token.start[0]} {flag} (comment)"
                                  for flag in FLAG.findall(token.string)]
    assert found == []


def test_the_flag_pattern_finds_long_options_only():
    assert FLAG.findall("use --set x=1 or --zero-tol; `{@wrt}`") == ["--set", "--zero-tol"]
    assert FLAG.findall("a --> b, ----, x--y, --1, -n") == []
