"""The docs follow the code: generated reference pages are current, the README is
short, keeps the commands CI runs, and links only to pages that exist.

The site itself is built strictly (every warning an error) by .ci/run.
"""

from __future__ import annotations

import difflib
import importlib.util
import re

import pytest

from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


@pytest.mark.parametrize("page", sorted(GEN.PAGES), ids=lambda p: p.name)
def test_generated_reference_page_is_current(page):
    expected = GEN.PAGES[page]()
    committed = page.read_text(encoding="utf-8") if page.exists() else ""
    if committed != expected:
        diff = "".join(list(difflib.unified_diff(
            committed.splitlines(keepends=True), expected.splitlines(keepends=True),
            fromfile=f"{page.relative_to(ROOT)} (committed)", tofile="generated now",
        ))[:60])
        pytest.fail(
            f"{page.relative_to(ROOT)} differs from the code (help text or result fields changed).\n"
            f"Regenerate it with `{GEN.REGENERATE}` and commit the result.\n{diff}",
            pytrace=False,
        )


def test_commands_page_has_every_command():
    from gradcli.cli import cli

    page = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## gradcli (\w+)$", page, re.MULTILINE)
    assert headings == list(cli.commands), headings
    # Each section is the command's own usage line, so a renamed command cannot hide.
    for name in cli.commands:
        assert f"Usage: gradcli {name} [OPTIONS]" in page, name


def test_readme_is_short_and_keeps_the_setup_commands_ci_runs():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 15 * 1024, len(text.encode("utf-8"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("pip install . && gradcli check sample_models/square.py",
                    "pip install '.[test]' && pytest"):
        assert f"\n{command}\n" in text, command
        # .ci/run runs the same commands (with -q for pip).
        assert command.replace("pip install .", "pip install . -q").replace(
            "'.[test]'", "'.[test]' -q") in ci, command


def test_readme_links_into_docs_resolve():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links to the docs pages"
    missing = [link for link in local if not (ROOT / link).is_file()]
    assert not missing, missing


def test_readme_examples_are_the_generated_transcripts():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- example ([\w-]+)[^>]*-->\n```console\n(.*?)```\n<!-- end example -->", text, re.S)
    assert blocks, "the README shows at least one generated example"
    for name, shown in blocks:
        generated = (DOCS / "examples" / f"{name}.txt").read_text(encoding="utf-8")
        assert shown == generated, f"README example {name} differs: run `python docs/gen_examples.py`"
