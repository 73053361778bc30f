"""JUnit XML (``--junit-xml``) in the shape pytest and Jenkins write.

    <testsuites tests= failures= errors= skipped= time=>
      <testsuite name="gradcli check" tests= failures= errors= skipped= time= timestamp=>
        <testcase classname="<model file>" name="<input>[/<output>]" time=>
          <failure message="<verdict>: <explanation>" type="<verdict>">report</failure>

The report of a failing pair is what the text report prints for it: the
failing elements, then the diagnosis (kinks, fast mode's power, the culprit op
with its line, Taylor orders), so a CI page names the op without the log.
        </testcase>

One testcase per checked (input, output) pair (and one named ``sweep`` when
``--samples``/``--special`` checked more points), named by the input alone when
the model has a single output. A model that could not be loaded, run or
checked is one testcase named ``load`` with an ``<error>``; a model that
``--fail-fast`` did not run is one testcase with ``<skipped>``. A model's
time is shared equally by its testcases, so the suite's time is the run's.
An interrupted run (Ctrl-C, SIGTERM) writes the models that finished, and one
``<error type="interrupted">`` testcase for each model it did not finish (or
one named ``interrupted`` when it had finished them all): such a file never
reads as a pass.

Every name, message and text goes through ``xml_text``: XML 1.0 cannot hold
control characters other than tab, newline and carriage return, lone
surrogates, U+FFFE or U+FFFF, and a single one makes the whole file unreadable.
ANSI escape sequences (colours in an exception's message) are dropped whole;
any other such character is written as a visible escape (``\\x00``,
``\\udcff``). The JSON report keeps the exact strings.
Reads result objects only.
"""

from __future__ import annotations

import datetime
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from gradcli.results import CheckResult  # hessian results are read duck-typed: no TF import


@dataclass
class Case:
    """One testcase; ``outcome`` is None (passed), "failure", "error" or "skipped"."""

    classname: str
    name: str
    time: float = 0.0
    outcome: str | None = None
    message: str = ""
    kind: str = ""
    text: str = ""
    output: str = ""  # warnings, for <system-out>


def check_cases(result: CheckResult) -> list[Case]:
    from gradcli.render.formatting import plain_text
    from gradcli.render.text import render_failed_pair

    cases = []
    for model in result.models:
        if model.error is not None:
            cases.append(Case(model.name, "load", model.seconds, "error", model.error,
                              f"exit code {model.error_code}", model.error))
            continue
        outputs = {p.output for p in model.pairs}
        share = model.seconds / max(1, len(model.pairs))
        for pair in model.pairs:
            name = pair.input if len(outputs) == 1 else f"{pair.input}/{pair.output}"
            case = Case(model.name, name, share,
                        output="\n".join(f"warning: {w}" for w in pair.warnings))
            if pair.failed:
                case.outcome, case.kind = "failure", pair.verdict
                case.message = f"{pair.verdict}: {pair.explanation}"
                case.text = plain_text(lambda out, pair=pair: render_failed_pair(pair, out))
            cases.append(case)
        if model.not_the_users_function:  # every verdict above is about another function
            from gradcli.render.text import render_call_proof

            proof = model.call_proof
            kind = "nondeterministic gradient" if proof.nondeterministic else "not the user's function"
            case = Case(model.name, "same function", 0.0, "failure",
                        proof.detail if proof.nondeterministic else f"not the user's function: {proof.detail}", kind)
            case.text = plain_text(lambda out, p=model.call_proof: render_call_proof(p, out))
            cases.append(case)
        if model.sweep is not None:  # one testcase for the points around the given one
            from gradcli.render.text import render_sweep

            case = Case(model.name, "sweep", 0.0)
            if model.sweep.failed:
                case.outcome, case.kind = "failure", "sweep"
                fail = "fails" if model.sweep.n_failing == 1 else "fail"
                case.message = f"sweep: {model.sweep.n_failing} of {model.sweep.points} points {fail}"
                case.text = plain_text(lambda out, s=model.sweep: render_sweep(s, out))
            cases.append(case)
    for name in result.skipped:
        cases.append(Case(name, "load", 0.0, "skipped", "not run: --fail-fast stopped the run"))
    return cases


#: An ANSI escape sequence (CSI such as colours, or OSC such as links), dropped whole.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
#: Characters XML 1.0 does not allow (its ``Char`` production, complemented).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text) -> str:
    """``text`` as XML 1.0 can hold it: ANSI sequences removed, every other
    character XML forbids written as a Python-style escape."""
    text = _ANSI.sub("", str(text))
    return _NOT_XML.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def document(cases: list[Case], suite: str) -> ET.ElementTree:
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(c.outcome == "failure" for c in cases)),
        "errors": str(sum(c.outcome == "error" for c in cases)),
        "skipped": str(sum(c.outcome == "skipped" for c in cases)),
        # the sum of the times the testcases show (each to the millisecond), so a
        # reader's sum of them is the suite's whatever the count of testcases
        "time": f"{sum(round(c.time, 3) for c in cases):.3f}",
    }
    from gradcli.render.formatting import printable  # a file name's newline would split the test's name

    root = ET.Element("testsuites", counts)
    testsuite = ET.SubElement(
        root, "testsuite",
        {"name": xml_text(suite), **counts,
         "timestamp": datetime.datetime.now().isoformat(timespec="seconds")},
    )
    for case in cases:
        node = ET.SubElement(testsuite, "testcase", {
            "classname": printable(xml_text(case.classname)), "name": xml_text(case.name),
            "time": f"{case.time:.3f}",
        })
        if case.outcome == "skipped":
            ET.SubElement(node, "skipped", {"message": xml_text(case.message)})
        elif case.outcome is not None:
            child = ET.SubElement(node, case.outcome,
                                  {"message": xml_text(case.message), "type": xml_text(case.kind)})
            child.text = xml_text(case.text)
        if case.output:
            ET.SubElement(node, "system-out").text = xml_text(case.output)
    ET.indent(root)
    return ET.ElementTree(root)


def report_bytes(command: str, result=None, error=None, model: str = "") -> bytes:
    """The JUnit file of ``gradcli COMMAND``: its cases; or, when the command
    could not run (``error``, a ``GradcliError``, and no ``result``), one error
    case for ``model``; or, for an interrupted run (both), the finished
    models' cases and an error case for each model not finished."""
    if result is None:
        cases = [Case(model, "load", 0.0, "error", str(error), f"exit code {error.exit_code}", str(error))]
    else:
        cases = CASES[command](result)
        if error is not None:
            cases = _interrupted(cases, result, str(error), command)
    buffer = io.BytesIO()
    document(cases, f"gradcli {command}").write(buffer, encoding="utf-8", xml_declaration=True)
    return buffer.getvalue() + b"\n"


def _interrupted(cases: list[Case], result, message: str, command: str) -> list[Case]:
    """The models the run did not finish (listed as ``skipped``) become errors."""
    unfinished = [c for c in cases if c.outcome == "skipped"]
    for case in unfinished:
        case.outcome, case.kind = "error", "interrupted"
        case.message = case.text = f"not finished: {message}"
    if not unfinished:
        cases.append(Case(f"gradcli {command}", "interrupted", 0.0, "error",
                          f"the run was {message}", "interrupted", f"the run was {message}"))
    return cases


def hessian_cases(result) -> list[Case]:
    """``gradcli hessian``: one testcase for the expectation (``expect convex``,
    or ``hessian`` without --expect) and one for the finite-difference check of
    the Hessian when it ran."""
    from gradcli.render.hessian_text import render_hessian
    from gradcli.render.formatting import plain_text

    report = plain_text(lambda out: render_hessian(result, out))
    name = f"expect {result.expect}" if result.expect else "hessian"
    cases = [Case(result.name, name, result.seconds)]
    if result.expectation_met is False:
        cases[0].outcome, cases[0].kind = "failure", "expectation"
        cases[0].message, cases[0].text = result.expectation_reason, report
    if result.fd_check is not None:
        case = Case(result.name, "finite-difference check", 0.0)
        if result.fd_check.failed:
            case.outcome, case.kind = "failure", "mismatch"
            case.message, case.text = "the Hessian disagrees with finite differences", report
        cases.append(case)
    return cases


CASES = {"check": check_cases, "hessian": hessian_cases}
