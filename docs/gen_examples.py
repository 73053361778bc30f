"""Run the example commands the docs show and save their real output:
``python docs/gen_examples.py [NAME...]`` writes ``docs/examples/NAME.txt``.

The guides include these files (MyST ``literalinclude``) instead of pasting
output by hand, so every figure in them (errors, counts, evaluations, times)
is what gradcli printed when the file was made. Run it after a change to the
reports; it needs TensorFlow and takes about a minute. Times vary from run to
run; everything else should only change when the code does.

The README's example blocks (between ``<!-- example NAME ... -->`` and
``<!-- end example -->``) are filled from the same files.

Each file shows ``$ gradcli ARGS``, then stdout, then stderr, then
``[exit N]`` when the exit code is not 0. Commands run in one process with
click's test runner, from a scratch folder holding links to ``sample_models``
and ``tests/models``, so paths read as a user would type them and saved files
(``--save``, ``--junit-xml``) do not land in the repository.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUT = DOCS / "examples"
#: Report width: wide enough for the check table, narrow enough for a page.
COLUMNS = 110

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


def run(argv: list[str]) -> str:
    from click.testing import CliRunner

    from gradcli.cli import cli

    if argv[0] == "@cat":
        return f"$ cat {argv[1]}\n{Path(argv[1]).read_text()}"
    runner = CliRunner(env={"COLUMNS": str(COLUMNS), "NO_COLOR": "1", "FORCE_COLOR": None})
    result = runner.invoke(cli, argv, prog_name="gradcli")
    text = f"$ gradcli {shlex.join(argv)}\n{result.stdout}{result.stderr}"
    if result.exit_code:
        text += f"[exit {result.exit_code}]\n"
    return text


#: A README block that shows an example: its name, and the fenced text to refill.
README_BLOCK = re.compile(r"(<!-- example (?P<name>[\w-]+)[^>]*-->\n```console\n).*?(```\n<!-- end example -->)", re.S)


def fill_readme(readme: Path) -> None:
    def block(match):
        text = (OUT / f"{match['name']}.txt").read_text(encoding="utf-8")
        return match.group(1) + text + match.group(3)

    readme.write_text(README_BLOCK.sub(block, readme.read_text(encoding="utf-8")), encoding="utf-8")


def main(names: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    unknown = sorted(set(names) - set(EXAMPLES))
    if unknown:
        print(f"unknown examples: {', '.join(unknown)} (known: {', '.join(EXAMPLES)})", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "sample_models").symlink_to(ROOT / "sample_models")
        (Path(scratch) / "tests").mkdir()
        (Path(scratch) / "tests" / "models").symlink_to(ROOT / "tests" / "models")
        os.chdir(scratch)
        try:
            for name in names or EXAMPLES:
                text = "".join(run(shlex.split(line)) for line in EXAMPLES[name])
                (OUT / f"{name}.txt").write_text(text.rstrip("\n") + "\n", encoding="utf-8")
                print(f"docs/examples/{name}.txt", file=sys.stderr)
        finally:
            os.chdir(here)
    fill_readme(ROOT / "README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
