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


def stable(text: str) -> str:
    """``text`` with the ``VOLATILE`` figures and the cells of ``TIME_COLUMNS``
    masked, and table rules and cells that only pad those figures squeezed, so
    two runs compare equal."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    lines, timed = text.splitlines(keepends=True), []
    for i, line in enumerate(lines):
        if line.startswith("┃"):
            timed = [j for j, cell in enumerate(line.rstrip("\n").split("┃")) if cell.strip() in TIME_COLUMNS]
        elif line.startswith("│") and timed:
            cells = line.rstrip("\n").split("│")
            for j in timed:
                cells[j] = re.sub(r"\d+(\.\d+)?", "N", cells[j])
            lines[i] = "│".join(cells) + line[len(line.rstrip("\n")):]
        elif line.startswith("└"):
            timed = []
    return re.sub(r"([ ━─═]){2,}", r"\1", "".join(lines))


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
        if not path.exists() or stable(path.read_text(encoding="utf-8")) != stable(text):
            changed.append(name)
    readme = ROOT / "README.md"
    if stable(fill_readme(readme, texts)) != stable(readme.read_text(encoding="utf-8")):
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
        if path.exists() and stable(path.read_text(encoding="utf-8")) == stable(text):
            continue  # only the clock differs: keep the file (and its times) as it is
        path.write_text(text, encoding="utf-8")
        print(f"docs/examples/{name}.txt", file=sys.stderr)
    readme = ROOT / "README.md"
    readme.write_text(fill_readme(readme), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
