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


LOGDET = """\
flow.py  [jacobian, float64, rtol=1e-06, atol=1e-09]  x -> output: slogdet of the autodiff Jacobian, n=4, 2 examples
┏━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━┳━━━━━━━━━┓
┃ example ┃ log_det_jacobian ┃    slogdet(J) ┃ sign ┃  abs err ┃ verdict ┃
┡━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━╇━━━━━━━━━┩
│ 0       │    -0.2883220644 │ -0.2883220644 │   +1 │ {e0} │ {v0}    │
│ 1       │     -1.626404308 │  {s1} │   +1 │ {e1} │ pass    │
└─────────┴──────────────────┴───────────────┴──────┴──────────┴─────────┘
log_det_jacobian agrees with slogdet of the Jacobian at all 2 examples (worst abs err {worst} at example {at})
"""

CHECK = """\
m.py  [full, {dtype}, rtol={rtol}, atol={atol}]
┏━━━━━━━┳━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┓
┃ input ┃ output ┃ verdict  ┃ max abs err ┃ max rel err ┃ worst (error / allowed) ┃ analytic ┃  numeric ┃
┡━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━┩
│ w     │ output │ {verdict} │ {abs_err} │ {rel_err} │ {worst} │ {analytic} │ -0.003986028 │
└───────┴────────┴──────────┴─────────────┴─────────────┴─────────────────────────┴──────────┴──────────┘
"""

ROUND_OFF = dict(e0="3.33e-16", v0="pass", s1="-1.626404308", e1="1.11e-15", worst="1.11e-15", at=1)
CHECK_PASS = dict(dtype="float64", rtol="1e-06", atol="1e-09", verdict="pass", abs_err="1.98e-11",
                  rel_err="4.28e-09", worst="output[2, 2] / w[0, 2]", analytic="-0.003986028")


def test_round_off_figures_and_their_places_agree_on_every_machine():
    """What another CPU's BLAS kernel moves: errors below the header's tolerance floor,
    the element or example holding the largest of them, a long figure's last digit."""
    other = dict(ROUND_OFF, e0="4.44e-16", e1="8.33e-16", worst="8.33e-16", at=0, s1="-1.626404309")
    assert gen.agree(LOGDET.format(**dict(ROUND_OFF, s1="-1.626404309")), LOGDET.format(**dict(ROUND_OFF, s1="-1.62640431")))
    assert gen.agree(LOGDET.format(**ROUND_OFF), LOGDET.format(**other))
    assert "worst abs err ~0 at *" in gen.stable(LOGDET.format(**ROUND_OFF))
    moved = dict(CHECK_PASS, abs_err="2.3e-11", rel_err="5.1e-09", worst="output[1, 0] / w[3, 1]", analytic="0.1")
    assert gen.agree(CHECK.format(**CHECK_PASS), CHECK.format(**moved))


@pytest.mark.parametrize("change", [
    dict(v0="FAIL"),  # a verdict
    dict(e0="2.1e-09"),  # an error above atol
    dict(worst="3e-06", e1="3e-06"),  # the worst error above atol
    dict(s1="-1.626404328"),  # a long figure two units off in its last digit
    dict(s1="-1.62640431"),  # ... as %.10g prints -1.626404310, two units from ...308
])
def test_a_change_above_round_off_still_fails_the_transcript(change):
    assert not gen.agree(LOGDET.format(**ROUND_OFF), LOGDET.format(**dict(ROUND_OFF, **change)))


@pytest.mark.parametrize("change", [
    dict(verdict="mismatch"),
    dict(abs_err="0.0012", rel_err="0.5"),  # an error above the floor keeps its place compared
    dict(rel_err="3e-06"),  # a relative error above rtol
])
def test_a_check_row_above_round_off_keeps_every_figure(change):
    assert not gen.agree(CHECK.format(**CHECK_PASS), CHECK.format(**dict(CHECK_PASS, **change)))
    failing = dict(CHECK_PASS, verdict="mismatch", abs_err="0.00749", rel_err="0.002")
    for moved in (dict(worst="output[1, 0] / w[3, 1]"), dict(analytic="-0.003986128"), dict(abs_err="0.0075")):
        assert not gen.agree(CHECK.format(**failing), CHECK.format(**dict(failing, **moved)))


def test_the_floor_is_the_checks_own_tolerance():
    """An error of 5e-9 is round-off in a float32 check (atol 1e-6 here) and an error in float64."""
    float64 = dict(CHECK_PASS, abs_err="5e-09", rel_err="1e-07")
    float32 = dict(float64, dtype="float32", rtol="0.0001", atol="1e-06")
    moved = dict(abs_err="7e-09", rel_err="2e-07", worst="output[0, 0] / w[0, 0]")
    assert gen.agree(CHECK.format(**float32), CHECK.format(**dict(float32, **moved)))
    assert not gen.agree(CHECK.format(**float64), CHECK.format(**dict(float64, **moved)))


def test_a_short_figure_is_compared_as_printed():
    line = "    output / x[2]: analytic 3.754277522, numeric 3.746783954 (abs err 0.00749, rel err 0.002)"
    assert gen.agree(line, line.replace("3.746783954", "3.746783955"))
    assert not gen.agree(line, line.replace("0.00749", "0.0075"))
    assert not gen.agree(line, line.replace("x[2]", "x[1]"))


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
