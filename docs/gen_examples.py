"""Run the example commands the docs show and save their real output:
``python docs/gen_examples.py [NAME...]`` writes ``docs/examples/NAME.txt``;
``python docs/gen_examples.py --check`` writes nothing and exits 1 when a
file, or a README block, differs from what the commands print now.

The guides include these files (MyST ``literalinclude``) instead of pasting
output by hand, so every figure in them (errors, counts, evaluations, times)
is what gradcli printed when the file was made: no page shows a transcript
written by hand. Run it after a change to the reports; it needs TensorFlow
and takes about a minute.

The README's example blocks (between ``<!-- example NAME ... -->`` and
``<!-- end example -->``) are filled from the same files.

Figures that change from run to run though the code does not (``VOLATILE``:
seconds, and the times, timestamp and host of a JUnit report) are written as
measured, and ``stable`` masks them, so a comparison (``--check``,
``tests/test_doc_transcripts.py``) sees a change of the code and never one of
the clock; a file whose only change would be the clock is not rewritten. Everything else must come out the same in every run: the models
are seeded, and the commands run in one process at a fixed width.

Each file shows ``$ gradcli ARGS``, then stdout, then stderr, then
``[exit N]`` when the exit code is not 0; ``@write FILE TEXT`` writes a file the
next commands read (a configuration) and shows it as ``$ cat FILE`` would, and
the scratch folder is shown as ``SHOWN_ROOT``. Commands run in one process with
click's test runner (models too: ``IN_PROCESS``), from a scratch folder holding
copies of ``sample_models`` and ``tests/models`` (``scratch_folder``), so paths
read as a user would type them and saved files (``--save``, ``--junit-xml``)
do not land in the repository. ``WIDTHS`` gives a wider report to the examples
whose names would not fit ``COLUMNS``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUT = DOCS / "examples"
#: Report width: wide enough for the check table, narrow enough for a page.
COLUMNS = 110
#: Set while the examples run: each model runs in this process (``gradcli.workers.batch``),
#: which prints what a worker would, without a TensorFlow import per model.
IN_PROCESS = "GRADCLI_IN_PROCESS"
#: Examples whose table needs more than COLUMNS (long weight names and indices).
WIDTHS = {"check-keras-loss": 150, "check-by-layer": 150, "check-by-layer-modules": 150}
#: Examples whose models run in workers, as on the command line: a model that ends its process.
WORKERS = {"check-ends-process"}
#: How the scratch folder is shown: a project folder of the reader's, the same in every run.
SHOWN_ROOT = "~/project"

#: name -> the command lines it shows (several for a sequence that shares files).
EXAMPLES = {
    "check-buggy": ["check sample_models/buggy_custom_gradient.py"],
    "check-quiet": ["check sample_models/square.py sample_models/buggy_custom_gradient.py --quiet"],
    "check-junit": [
        "check sample_models/square.py sample_models/sign_loss.py sample_models/buggy_custom_gradient.py"
        " --junit-xml report.xml --quiet",
        "@cat report.xml",
    ],
    "check-taylor": ["check sample_models/square.py --taylor"],
    "check-relu": ["check sample_models/relu_at_zero.py"],
    "check-fake-quant": ["check sample_models/fake_quant.py"],
    "check-fake-quant-args": ["check tests/models/diag_fake_quant_args.py",
                              "check tests/models/diag_fake_quant_args.py --allow-surrogate"],
    "check-round-cast": ["check sample_models/round_cast.py"],
    "check-sign": ["check sample_models/sign_loss.py"],
    "check-culprit": ["check tests/models/diag_deep_custom_gradient.py --wrt x"],
    "check-order-2": ["check tests/models/hess_stop_gradient.py --order 2"],
    "check-dropout": ["check tests/models/diag_dropout.py"],
    "check-nan": ["check tests/models/diag_nan_grad.py"],
    "check-keras-loss": ["check tests/models/keras_loss_custom_layer.py"],
    "check-by-layer": ["check tests/models/by_layer_functional.py --by-layer"],
    "check-by-layer-modules": ["check tests/models/by_layer_modules.py --mode fast --layers 'blocks/1*'"],
    "check-github": ["check sample_models/buggy_custom_gradient.py --format github"],
    "check-github-warning": ["check tests/models/ciout_round_cut.py --format github"],
    "check-ends-process": ["check tests/models/exit_on_run.py sample_models/square.py"],
    "jacobian-memory": ["jacobian tests/models/mem_20k.py --max-memory 1GB"],
    "check-project-folder": [
        '@write pyproject.toml "[project]\\nname = \\"demo\\"\\n"',
        '@write .gitignore "scratch_*.py\\n"',
        '@write models/__init__.py ""',
        '@write models/layers.py "import tensorflow as tf\\n\\ndef cube(x):\\n    return x * x * x\\n"',
        '@write models/net.py "from models.layers import cube\\n\\ndef model(x):\\n    return cube(x)\\n\\ninputs = {\\"x\\": [0.5, -1.0]}\\n"',
        '@write models/scratch_try.py "model = None\\n"',
        "check models/",
    ],
    "check-project-helpers": [
        '@write helpers/util.py "def scale(x):\\n    return 2.0 * x\\n"',
        "check helpers",
    ],
    "config-show": ['@write pyproject.toml "[tool.gradcli]\\npaths = [\\"sample_models\\"]\\nrtol = 1e-5\\n"',
                    "check --show-config --atol 1e-7"],
    "config-bad-value": ['@write pyproject.toml "[tool.gradcli]\\nmode = \\"slow\\"\\n"', "check sample_models/square.py"],
    "config-outside": ['@write pyproject.toml "[tool.gradcli]\\njunit-xml = \\"../report.xml\\"\\n"',
                       "check sample_models/square.py"],
    "vjp-square": ["vjp sample_models/square.py",
                   "vjp sample_models/square.py --cotangent output=[2,3]"],
    "jvp-square": ["jvp sample_models/square.py --tangent x=[1,0]"],
    "jacobian-square": ["jacobian sample_models/square.py"],
    "jacobian-two-by-two": ["jacobian sample_models/two_by_two.py"],
    "jacobian-numeric": ["jacobian tests/models/insp_numpy_blackbox.py --numeric"],
    "chain": [
        "forward sample_models/chain_inner.py --save h.npz",
        "vjp sample_models/chain_outer.py --set h=@h.npz:output --cotangent output=[1,-1] --save dh.npz",
        "vjp sample_models/chain_inner.py --cotangent output=@dh.npz:h",
        "vjp sample_models/chain_full.py --cotangent output=[1,-1]",
    ],
    "vjp-keras-badly-scaled": ["vjp sample_models/keras_badly_scaled.py"],
    "hessian-rosenbrock": ["hessian sample_models/rosenbrock.py"],
    "hessian-tanh-region": [
        "hessian sample_models/tanh_net.py --set w1=1 --set w2=0.5 --samples 40 --radius 0.6"
        " --expect convex --no-fd-check",
    ],
    "logdet-realnvp": ["logdet sample_models/realnvp_flow.py"],
    "logdet-wrong-gradient": ["logdet tests/models/logdet_wrong_custom_gradient.py"],
    "logdet-wrong-log-det": ["logdet tests/models/logdet_wrong_log_det.py"],
}


def run(argv: list[str], columns: int = COLUMNS) -> str:
    from click.testing import CliRunner

    from gradcli.cli import cli

    if argv[0] == "@cat":
        return f"$ cat {argv[1]}\n{Path(argv[1]).read_text()}"
    if argv[0] == "@write":  # a file the next commands read, shown as the reader would see it
        Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[1]).write_text(argv[2].encode().decode("unicode_escape"), encoding="utf-8")
        return f"$ cat {argv[1]}\n{Path(argv[1]).read_text(encoding='utf-8')}"
    runner = CliRunner(env={"COLUMNS": str(columns), "NO_COLOR": "1", "FORCE_COLOR": None, "GITHUB_WORKSPACE": None})
    result = runner.invoke(cli, argv, prog_name="gradcli")
    text = f"$ gradcli {shlex.join(argv)}\n{result.stdout}{result.stderr}"
    if result.exit_code:
        text += f"[exit {result.exit_code}]\n"
    return text


#: A README block that shows an example: its name, and the fenced text to refill.
README_BLOCK = re.compile(r"(<!-- example (?P<name>[\w-]+)[^>]*-->\n```console\n).*?(```\n<!-- end example -->)", re.S)


def fill_readme(readme: Path, texts: dict[str, str] | None = None) -> str:
    """The README with each example block refilled (from ``texts``, else the files)."""

    def block(match):
        name = match["name"]
        text = texts[name] if texts and name in texts else (OUT / f"{name}.txt").read_text(encoding="utf-8")
        return match.group(1) + text + match.group(3)

    return README_BLOCK.sub(block, readme.read_text(encoding="utf-8"))


#: Figures that vary from run to run with the same code, and what ``stable`` writes instead.
VOLATILE = (
    (re.compile(r"\b\d+(\.\d+)? s\b"), "N s"),  # seconds: "0.66 s", "1 s"
    (re.compile(r'\b(time|timestamp|hostname)="[^"]*"'), r'\1="N"'),  # a JUnit report's clock and host
)


#: Table columns of seconds (their cells are bare numbers): masked like ``VOLATILE``.
TIME_COLUMNS = ("seconds", "time")

# -- figures that vary from machine to machine with the same code --------------
#
# An error at round-off level depends on the order of a sum, which the BLAS
# kernel a CPU picks (and its thread count, and oneDNN) decides: the same code
# printed ``worst abs err 1.11e-15 at example 3`` on one machine and
# ``8.33e-16`` on another. Such figures carry no verdict: an error below the
# check's own tolerance floor (the ``rtol``/``atol`` its header line prints;
# float64's defaults where a transcript prints none) cannot change one. So an
# *error figure* (one labelled ``abs err``, ``rel err`` or ``fd error
# estimate``, or in a table column so headed) below its floor reads ``~0``, and
# the place named beside it (``at example N``; a table row's worst element and
# its analytic and numeric values) reads ``*``: which element holds the largest
# round-off is round-off too. Every other figure is compared as printed,
# except that a long one (``LONG_DIGITS`` significant digits or more: values
# printed to ten digits) may differ by one unit in its last digit, a rounding
# flip of a value that moved by round-off. A changed verdict, element, count,
# or an error above the floor still fails.

#: Float64's default tolerance (``verdicts.compare``), for a transcript whose header prints none.
DEFAULT_FLOOR = {"rtol": 1e-6, "atol": 1e-9}
#: Figures with at least this many significant digits may differ by one unit in the last.
LONG_DIGITS = 7
NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
#: An error figure in running text, and the kind of floor it is held to.
ERROR_FIGURE = re.compile(rf"\b(abs err|rel err|fd error estimate) ({NUMBER})")
#: A table column of error figures (a header cell, possibly cut short by rich: "max abs e…").
ERROR_COLUMN = re.compile(r"^(max )?(abs|rel) e")
#: Table columns that name or show the element where an error figure was found.
PLACE_COLUMNS = re.compile(r"^(worst|analytic|numeric)")
#: The place a line names beside a round-off figure.
PLACE_AFTER = re.compile(r"~0( at example \d+| at \S+\[[\d, ]+\])")


def _floors(text: str) -> dict:
    """The tolerance floor each transcript block is held to: from the last header line seen."""
    found = re.findall(r"rtol=(" + NUMBER + r"), atol=(" + NUMBER + r")", text)
    if not found:
        return dict(DEFAULT_FLOOR)
    rtol, atol = found[0]
    return {"rtol": float(rtol), "atol": float(atol)}


def _floor_of(label: str, floors: dict) -> float:
    return floors["rtol"] if label.startswith("rel") else floors["atol"]


def _round_off_line(line: str, floors: dict) -> str:
    def figure(match):
        value = float(match[2])
        return f"{match[1]} ~0" if abs(value) < _floor_of(match[1], floors) else match[0]

    line = ERROR_FIGURE.sub(figure, line)
    return PLACE_AFTER.sub("~0 at *", line)


def _round_off_row(cells: list[str], header: list[str], floors: dict) -> list[str]:
    """A table row with its round-off error cells and their place masked."""
    masked = False
    for j, title in enumerate(header):
        kind = ERROR_COLUMN.match(title)
        if kind and j < len(cells) and re.fullmatch(r"\s*" + NUMBER + r"\s*", cells[j]):
            if abs(float(cells[j])) < _floor_of(kind[2], floors):
                cells[j], masked = " ~0 ", True
    if masked:
        for j, title in enumerate(header):
            if PLACE_COLUMNS.match(title) and j < len(cells) and cells[j].strip():
                cells[j] = " * "
    return cells


def stable(text: str) -> str:
    """``text`` with the ``VOLATILE`` figures, the cells of ``TIME_COLUMNS`` and
    round-off-level error figures and their places masked, and table rules and
    cells that only pad those figures squeezed, so two runs (on two machines)
    compare equal (``agree`` then allows a last-digit flip of long figures)."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    lines, header, floors = text.splitlines(keepends=True), [], dict(DEFAULT_FLOOR)
    for i, line in enumerate(lines):
        body, end = line.rstrip("\n"), line[len(line.rstrip("\n")):]
        if "rtol=" in body:
            floors = _floors(body)
        if body.startswith("┃"):
            header = [cell.strip() for cell in body.split("┃")]
        elif body.startswith("│") and header:
            cells = body.split("│")
            for j, title in enumerate(header):
                if title in TIME_COLUMNS and j < len(cells):
                    cells[j] = re.sub(r"\d+(\.\d+)?", "N", cells[j])
            lines[i] = "│".join(_round_off_row(cells, header, floors)) + end
        elif body.startswith("└"):
            header = []
        else:
            lines[i] = _round_off_line(body, floors) + end
    return re.sub(r"([ ━─═]){2,}", r"\1", "".join(lines))


def _significant(figure: str) -> int:
    mantissa = re.sub(r"e.*$", "", figure).lstrip("-").replace(".", "").lstrip("0")
    return len(mantissa)


def _last_digit_apart(a: str, b: str) -> bool:
    """Two long figures (``LONG_DIGITS``) one unit of the last printed digit apart, or closer."""
    digits = max(_significant(a), _significant(b))  # "1.62640431" is "1.626404310" printed by %.10g
    if digits < LONG_DIGITS:
        return False
    unit = max(abs(float(a)), abs(float(b))) * 10.0 ** (1 - digits)
    return abs(float(a) - float(b)) <= unit * (1 + 1e-9)


def agree(a: str, b: str) -> bool:
    """Whether two transcripts show the same thing (module comment above ``DEFAULT_FLOOR``):
    equal after ``stable``, but for long figures a last digit apart."""
    a, b = stable(a), stable(b)
    if a == b:
        return True
    split = re.compile(rf"({NUMBER})")
    parts_a, parts_b = split.split(a), split.split(b)
    if len(parts_a) != len(parts_b):
        return False
    for k, (x, y) in enumerate(zip(parts_a, parts_b)):
        if x == y:
            continue
        if k % 2 == 0 or not _last_digit_apart(x, y):  # text, or a figure that moved
            return False
    return True


@contextlib.contextmanager
def scratch_folder():
    """A scratch working folder holding copies of ``sample_models`` and ``tests/models``:
    copies, not links, so a path resolves inside it, as in a checkout; and an
    empty ``.git``, so it is a repository root: no configuration file above it is
    read (``gradcli.config``) and annotations name files relative to it."""
    here = os.getcwd()
    ignore = shutil.ignore_patterns("__pycache__", "*.npz")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / ".git").mkdir()
        shutil.copytree(ROOT / "sample_models", root / "sample_models", ignore=ignore)
        shutil.copytree(ROOT / "tests" / "models", root / "tests" / "models", ignore=ignore)
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(here)


def transcripts(names=None) -> dict[str, str]:
    """Run the examples (``names``, default all) and return each one's transcript."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    texts = {}
    in_process = os.environ.get(IN_PROCESS)
    os.environ[IN_PROCESS] = "1"  # models run here, not each in a worker that imports TensorFlow again
    try:
        with scratch_folder() as root:
            for name in names or EXAMPLES:
                columns = WIDTHS.get(name, COLUMNS)
                os.environ[IN_PROCESS] = "0" if name in WORKERS else "1"
                text = "".join(run(shlex.split(line), columns) for line in EXAMPLES[name])
                for line in EXAMPLES[name]:  # files an example wrote are not the next one's
                    if line.startswith("@write "):
                        Path(shlex.split(line)[1]).unlink()
                for folder in {str(root), os.path.realpath(root)}:
                    text = text.replace(folder, SHOWN_ROOT)
                texts[name] = text.rstrip("\n") + "\n"
    finally:
        if in_process is None:
            os.environ.pop(IN_PROCESS)
        else:
            os.environ[IN_PROCESS] = in_process
    return texts


def drift(texts: dict[str, str]) -> list[str]:
    """The examples whose file (or README block) differs from ``texts`` beyond ``stable``."""
    changed = []
    for name, text in texts.items():
        path = OUT / f"{name}.txt"
        if not path.exists() or not agree(path.read_text(encoding="utf-8"), text):
            changed.append(name)
    readme = ROOT / "README.md"
    if not agree(fill_readme(readme, texts), readme.read_text(encoding="utf-8")):
        changed.append("README.md")
    return changed


def main(args: list[str]) -> int:
    check = "--check" in args
    names = [a for a in args if a != "--check"]
    unknown = sorted(set(names) - set(EXAMPLES))
    if unknown:
        print(f"unknown examples: {', '.join(unknown)} (known: {', '.join(EXAMPLES)})", file=sys.stderr)
        return 2
    texts = transcripts(names)
    if check:
        changed = drift(texts)
        for name in changed:
            print(f"differs: {name}", file=sys.stderr)
        return 1 if changed else 0
    OUT.mkdir(exist_ok=True)
    for name, text in texts.items():
        path = OUT / f"{name}.txt"
        if path.exists() and agree(path.read_text(encoding="utf-8"), text):
            continue  # only the clock or round-off differs: keep the file as it is
        path.write_text(text, encoding="utf-8")
        print(f"docs/examples/{name}.txt", file=sys.stderr)
    readme = ROOT / "README.md"
    readme.write_text(fill_readme(readme), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
