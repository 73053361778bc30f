"""Every recipe of the README runs as written and ends with the exit code the
table states: each command is read from the table, run from a scratch copy of
what a fresh clone holds (the sample models, the test fixtures, the example
project) with the working folder at its root, and its steps (``A && B``,
``(cd DIR && C)``) run in order as a shell runs them. ``gradcli`` steps run
in this process through click's runner; ``pytest`` steps in this process too
(``pytest.main``). docs/recipes.md shows the same commands.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil

import pytest

from tests.conftest import ROOT, gradcli

#: What a recipe may use from the clone, copied to the scratch folder.
NEEDED = ("sample_models", "tests/models", "examples")
#: A table row: | question | `command` | exit |
ROW = re.compile(r"^\| (?P<question>.+?) \| `(?P<command>[^`]+)` \| (?P<exit>\d+) \|$", re.M)


def readme_recipes() -> list[tuple[str, str, int]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Recipes"):]
    section = section[: section.index("\n## ", 1)]
    return [(m["question"], m["command"], int(m["exit"])) for m in ROW.finditer(section)]


def steps(command: str) -> list[list[str]]:
    """``A && B`` -> [A, B] as argument lists; a ``( ... )`` subshell is its steps."""
    command = command.strip()
    if command.startswith("(") and command.endswith(")"):
        command = command[1:-1]
    return [shlex.split(part) for part in command.split(" && ")]


def test_the_table_has_every_recipe():
    recipes = readme_recipes()
    assert len(recipes) >= 19
    for question, command, exit_code in recipes:
        assert exit_code in (0, 1), question
        for argv in steps(command):
            assert argv[0] in ("gradcli", "pytest", "cd"), command


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    root = tmp_path_factory.mktemp("clone")
    for name in NEEDED:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
    return root


def run_step(argv: list[str]) -> int:
    if argv[0] == "gradcli":
        result = gradcli(*argv[1:])
        assert "Traceback" not in result.stderr, result
        return result.exit_code
    if argv[0] == "pytest":
        return int(pytest.main([*argv[1:], "-q", "-p", "no:cacheprovider"]))
    raise AssertionError(f"no runner for {argv}")


@pytest.mark.parametrize("question, command, exit_code", readme_recipes(), ids=lambda v: str(v)[:40])
def test_recipe_runs_as_written(question, command, exit_code, clone, monkeypatch):
    monkeypatch.chdir(clone)
    *first, last = steps(command)
    for argv in first:
        if argv[0] == "cd":
            monkeypatch.chdir(argv[1])
            continue
        assert run_step(argv) == 0, f"{shlex.join(argv)} failed: the steps after it would not run"
    assert run_step(last) == exit_code, command


def recipes_page_blocks() -> dict[tuple[str, ...], int]:
    """The console blocks of docs/recipes.md: their ``$`` lines -> the ``[exit N]`` they show (0 if none)."""
    page = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8")
    blocks = {}
    for block in re.findall(r"```console\n(.*?)```", page, re.S):
        lines = block.splitlines()
        commands = tuple(shlex.join(shlex.split(line[2:])) for line in lines if line.startswith("$ "))
        shown = [int(m) for line in lines for m in re.findall(r"^\[exit (\d+)\]$", line)]
        blocks[commands] = shown[-1] if shown else 0
    return blocks


def test_recipes_page_shows_the_same_commands_and_exit_codes():
    blocks = recipes_page_blocks()
    for question, command, exit_code in readme_recipes():
        key = tuple(shlex.join(argv) for argv in steps(command))
        assert key in blocks, f"docs/recipes.md does not show {command!r} ({question})"
        assert blocks[key] == exit_code, command
