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
            f"{page.relative_to(ROOT)} differs from what the code generates now (a --help text,\n"
            "a result field, a rule docstring or a module changed).\n"
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


#: What the README's model-file summary says of the defaults, each held to the code below.
README_CLAIMS = {
    "wrt": "default every floating input and\n  every trainable weight (a Keras model's, the file's layers' and `tf.Module`s'), weights named\n  by their path (`dense/kernel`)",
    "inputs": "a callable taking a `numpy.random.Generator` that returns\n  one (`--rng-seed` makes it reproducible)",
}


def test_readme_claims_about_defaults_are_what_the_code_does():
    """The README's summary of a model file says what the loader does by default: the
    sentences are pinned here, and each is checked against a load of a sample model."""
    import numpy as np

    from gradcli.model.loading import load_model

    text = README.read_text(encoding="utf-8")
    for name, claim in README_CLAIMS.items():
        assert claim in text, f"README's `{name}` claim changed: check it against the code, then update README_CLAIMS"
    mlp = load_model(str(ROOT / "sample_models" / "keras_mlp.py"))
    weights = ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    assert sorted(mlp.wrt) == sorted(["x", *weights]), mlp.wrt  # inputs and weights
    assert set(mlp.weights) == set(weights)  # named by path, without the model's name
    seeded = [load_model(str(ROOT / "sample_models" / "keras_mlp.py"), rng_seed=s).point["x"] for s in (3, 3, 4)]
    assert np.array_equal(seeded[0], seeded[1]) and not np.array_equal(seeded[0], seeded[2])


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


def test_every_sample_model_is_described():
    page = (DOCS / "samples.md").read_text(encoding="utf-8")
    described = set(re.findall(r"`(\w+\.py)`", page))
    samples = {p.name for p in (ROOT / "sample_models").glob("*.py")}
    assert samples <= described, sorted(samples - described)


def _help_examples(help_text: str) -> list[str]:
    """Command lines shown under an ``Example:``/``Examples:`` heading of a --help text
    (on the heading's line or on the lines after it, up to a blank line)."""
    found, inside = [], False
    for line in help_text.splitlines():
        heading = re.match(r"\s*Examples?:\s*(.*)$", line)
        if heading:
            inside, line = True, heading[1]
        elif not line.strip():
            inside = False
        command = re.match(r"\s*\$?\s*(gradcli\s.*)$", line) if inside else None
        if command:
            found.append(command[1])
    return found


def test_help_examples_are_valid_command_lines(monkeypatch):
    """Each example a --help shows names its own command and parses with that command's
    options (click only parses: nothing runs, no TensorFlow)."""
    import shlex

    import click

    from gradcli.cli import cli

    monkeypatch.chdir(ROOT)  # examples name the bundled samples by relative path
    root = click.Context(cli, info_name="gradcli", **cli.context_settings)
    shown = {}
    for name, command in cli.commands.items():
        help_text = command.get_help(click.Context(command, info_name=name, parent=root))
        shown[name] = _help_examples(help_text)
    if not any(shown.values()):
        pytest.skip("no command's --help shows an example yet")
    for name, examples in shown.items():
        for example in examples:
            program, used, *args = shlex.split(example)
            assert (program, used) == ("gradcli", name), example
            cli.commands[name].make_context(name, args, parent=root)  # raises on a bad option


def _documented_command_lines() -> list[str]:
    """The gradcli command lines of the README's recipes table and the recipes page that
    name a bundled model (the others stand for the reader's own files)."""
    lines = re.findall(r"^\| .* \| `(gradcli [^`]+)` \|$", README.read_text(encoding="utf-8"), re.MULTILINE)
    lines += re.findall(r"^\$ (gradcli .+)$", (DOCS / "recipes.md").read_text(encoding="utf-8"), re.MULTILINE)
    return [line for line in lines if re.search(r"\s(sample_models|tests/models)/", line)]


def test_recipes_name_real_models_and_options(monkeypatch):
    """Every recipe names a model that exists and options its command has (parsed by click,
    nothing run); what each prints is shown by the generated examples."""
    import shlex

    import click

    from gradcli.cli import cli

    monkeypatch.chdir(ROOT)
    lines = _documented_command_lines()
    assert len(lines) >= 10, lines
    root = click.Context(cli, info_name="gradcli", **cli.context_settings)
    for line in lines:
        _, name, *args = shlex.split(line)
        model = args[0].split(":")[0]
        assert (ROOT / model).is_file(), line
        cli.commands[name].make_context(name, args, parent=root)  # raises on an unknown option


def test_every_example_transcript_is_generated_and_shown():
    spec = importlib.util.spec_from_file_location("gen_examples", DOCS / "gen_examples.py")
    gen_examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_examples)
    files = {p.stem for p in (DOCS / "examples").glob("*.txt")}
    assert files == set(gen_examples.EXAMPLES), "run `python docs/gen_examples.py`; delete unused files"
    pages = "".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")) + README.read_text(encoding="utf-8")
    shown = set(re.findall(r"examples/([\w-]+)\.txt", pages)) | set(re.findall(r"<!-- example ([\w-]+)", pages))
    assert files <= shown, sorted(files - shown)
