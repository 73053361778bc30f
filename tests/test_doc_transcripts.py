"""The transcripts in the README and the docs are what the commands print now.

``docs/gen_examples.py`` runs every example into memory here and compares it,
and the README's example blocks, with the files the pages include; figures
that vary from run to run with the same code (seconds, a JUnit report's
clock) are masked by the script's ``stable``, so only a change of the code
fails the test. No page may show output written by hand.
"""

from __future__ import annotations

import difflib
import importlib.util
import re

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_examples", DOCS / "gen_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_stable_masks_the_clock_and_nothing_else():
    line = "  94 function evaluations, 1.42 s   (abs err 0.00749, rel err 0.002, fd error estimate 1.18e-09)"
    assert gen.stable(line) == " 94 function evaluations, N s (abs err 0.00749, rel err 0.002, fd error estimate 1.18e-09)"
    assert gen.stable("│ square.py │ 0.54 s │") == gen.stable("│ square.py │ 12.04 s │")
    table = "┃ layer ┃ weights ┃ seconds ┃\n│ net/d1 │ {} │ {} │\n└───┘\n"
    assert gen.stable(table.format(56, 0.25)) == gen.stable(table.format(56, 10.5))
    assert gen.stable(table.format(56, 0.25)) != gen.stable(table.format(57, 0.25))
    junit = '<testsuite tests="3" failures="1" time="1.404" timestamp="2026-11-23T23:14:46" hostname="ci-7">'
    assert gen.stable(junit) == '<testsuite tests="3" failures="1" time="N" timestamp="N" hostname="N">'
    # every other figure still counts: an element, a count, an error
    for changed in ("  95 function evaluations, 1.42 s", "  94 function evaluations, 1.42 s (abs err 0.0075)"):
        assert gen.stable(changed) != gen.stable(line)


@pytest.fixture(scope="module")
def transcripts():
    return gen.transcripts()


def test_every_transcript_is_what_its_commands_print(transcripts):
    assert set(transcripts) == set(gen.EXAMPLES)
    changed = gen.drift(transcripts)
    if changed:
        name = changed[0]
        if name == "README.md":
            old = (ROOT / "README.md").read_text(encoding="utf-8")
            new = gen.fill_readme(ROOT / "README.md", transcripts)
        else:
            old = (gen.OUT / f"{name}.txt").read_text(encoding="utf-8") if (gen.OUT / f"{name}.txt").exists() else ""
            new = transcripts[name]
        diff = "".join(difflib.unified_diff(
            gen.stable(old).splitlines(True), gen.stable(new).splitlines(True), "shown", "printed now"))
        pytest.fail(f"stale transcripts {', '.join(changed)}: run `python docs/gen_examples.py`\n{diff}")


def test_the_failure_example_of_the_readme_is_generated():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## What a failure looks like"):]
    section = section[: section.index("\n## ", 1)]
    assert "<!-- example check-buggy" in section and "<!-- end example -->" in section


#: Lines only a command's output holds: table rules and cells, report lines, annotations.
OUTPUT_MARKS = re.compile(
    r"[┏┃│┡└]|^\s*(FAIL |note: |warning: |Error: |progress: |culprit: |::error |::warning |<\?xml )"
    r"|\d+ of \d+ models? passed"
)


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """``(info string, lines)`` of each fenced code block, in order."""
    blocks, info, lines = [], None, []
    for line in text.splitlines():
        fence = re.match(r"^\s*```(.*)$", line)
        if fence and info is None:
            info, lines = fence.group(1).strip(), []
        elif fence and not fence.group(1).strip():
            blocks.append((info, lines))
            info = None
        elif info is not None:
            lines.append(line)
    return blocks


def hand_written_output(text: str) -> list[str]:
    """The first line of each fenced block that holds command output, outside
    the generated README blocks (an included file is no block of the page)."""
    text = re.sub(r"<!-- example [\w-]+[^>]*-->.*?<!-- end example -->", "", text, flags=re.S)
    return [
        lines[0] for info, lines in fenced_blocks(text)
        if info in ("", "text", "console", "shell", "bash") and any(OUTPUT_MARKS.search(l) for l in lines)
    ]


def test_no_page_shows_output_written_by_hand():
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    shown = {str(p.relative_to(ROOT)): hand_written_output(p.read_text(encoding="utf-8")) for p in pages}
    assert {page: blocks for page, blocks in shown.items() if blocks} == {}, (
        "show output with a generated example (docs/gen_examples.py, literalinclude)"
    )


def test_the_guard_sees_a_pasted_report():
    pasted = "```text\n  FAIL x -> output: mismatch\n```\n"
    assert hand_written_output(pasted) == ["  FAIL x -> output: mismatch"]
    assert hand_written_output("```console\n$ gradcli check m.py\n[exit 1]\n```\n") == []
