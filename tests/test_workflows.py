"""CI workflows: --fail-on, --shard, --format github / --summary, pre-commit,
the pytest plugin, plots and progress (issue 13)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from conftest import gradcli, line_of, ROOT, sample, SAMPLES

# --- --fail-on -------------------------------------------------------------------


def test_sign_loss_is_zero_and_passes_by_default():
    # d/dw sum(sign(w x) y) = 0 wherever w x != 0 (here w x = 0.8, -2.4): the
    # true derivative and TensorFlow's agree, so the default verdict is a pass.
    run = gradcli("check", sample("sign_loss.py"), "--json")
    assert run.exit_code == 0, run
    (pair,) = run.result["models"][0]["pairs"]
    assert (pair["verdict"], pair["failed"]) == ("zero", False)


def test_fail_on_zero_fails_the_sign_loss():
    run = gradcli("check", sample("sign_loss.py"), "--fail-on", "zero", "--json")
    assert run.exit_code == 1, run
    (pair,) = run.result["models"][0]["pairs"]
    assert (pair["verdict"], pair["failed"]) == ("zero", True)
    assert pair["explanation"].endswith("(fails: fail_on lists zero)")


def test_fail_on_from_pyproject(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.gradcli]\nfail-on = ["kink", "zero"]\n')
    monkeypatch.chdir(tmp_path)
    run = gradcli("check", sample("sign_loss.py"))
    assert run.exit_code == 1, run
    assert "(fails: fail_on lists zero)" in run.stdout


def test_fail_on_leaves_other_verdicts_alone():
    # square.py passes: listing every word must not turn a pass into a failure.
    run = gradcli("check", sample("square.py"), "--fail-on", "zero,kink,surrogate,disconnected,inconclusive")
    assert run.exit_code == 0, run


@pytest.mark.parametrize("args, message", [
    (["--fail-on", "zero,bogus"],
     "Error: Invalid value for '--fail-on': must be one of zero, kink, surrogate, disconnected, "
     "inconclusive, got 'bogus' (see 'gradcli check --help')"),
    (["--fail-on", "surrogate", "--allow-surrogate"],
     "Error: --fail-on lists surrogate, which --allow-surrogate lets pass: choose one "
     "(see 'gradcli check --help')"),
])
def test_fail_on_usage_errors(args, message):
    run = gradcli("check", sample("sign_loss.py"), *args)
    assert (run.exit_code, run.stderr.strip()) == (2, message), run


def test_fail_on_api_keyword():
    import gradcli as api

    assert api.check(sample("sign_loss.py")).ok
    assert not api.check(sample("sign_loss.py"), fail_on=["zero"]).ok


# --- --shard ---------------------------------------------------------------------


def test_shards_partition_the_batch_stably():
    from gradcli.model.paths import expand_models, shard_models

    batch = expand_models([str(SAMPLES)])
    for count in (1, 2, 3, 5, len(batch), len(batch) + 3):
        shards = [shard_models(batch, k, count) for k in range(1, count + 1)]
        union = list(itertools.chain.from_iterable(shards))
        assert sorted(union) == sorted(batch)  # every model once: a partition
        assert len(set(union)) == len(union)
        sizes = [len(s) for s in shards]
        assert max(sizes) - min(sizes) <= 1
        for seed in range(3):  # the same split whatever order the arguments came in
            shuffled = batch[:]
            random.Random(seed).shuffle(shuffled)
            assert [shard_models(shuffled, k, count) for k in range(1, count + 1)] == shards


def test_shard_is_round_robin_over_sorted_paths():
    from gradcli.model.paths import shard_models

    names = ["d.py", "./a.py", "c.py", "b.py", "e.py"]
    assert shard_models(names, 1, 2) == ["./a.py", "c.py", "e.py"]
    assert shard_models(names, 2, 2) == ["b.py", "d.py"]


def test_shard_on_the_command_line(tmp_path):
    models = [sample(n) for n in ("square.py", "two_by_two.py", "sign_loss.py")]
    seen = []
    for k in (1, 2):
        run = gradcli("check", *models, "--shard", f"{k}/2", "--json")
        assert run.exit_code == 0, run
        seen.append([Path(m["path"]).name for m in run.result["models"]])
    assert seen == [["sign_loss.py", "two_by_two.py"], ["square.py"]]


@pytest.mark.parametrize("value", ["3/2", "0/2", "1", "a/b", "1/0"])
def test_bad_shard_is_a_usage_error(value):
    run = gradcli("check", sample("square.py"), "--shard", value)
    assert run.exit_code == 2, run
    assert run.stderr.startswith(f"Error: Invalid value for '--shard': '{value}' is not K/N"), run


# --- --format github and --summary --------------------------------------------------


def test_workflow_command_escaping():
    from gradcli.render.github import command

    assert command("error", "50% off\nnext\r", file="a,b:c.py", line=3, title="t: x, y") == (
        "::error file=a%2Cb%3Ac.py,line=3,title=t%3A x%2C y::50%25 off%0Anext%0D"
    )
    assert command("warning", "m", file="f.py", title="t") == "::warning file=f.py,title=t::m"


def test_github_annotations_at_the_model_and_the_definition(monkeypatch, tmp_path):
    import numpy as np

    monkeypatch.chdir(ROOT)
    model = "sample_models/buggy_custom_gradient.py"
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    run = gradcli("check", model, "--format", "github", "-q", "--summary", summary)
    assert run.exit_code == 1, run
    commands = [line for line in run.stdout.splitlines() if line.startswith("::")]
    assert len(commands) == 2, run
    # Independent truth: f = sum(softplus(x)^2), df/dx = 2 softplus(x) sigmoid(x); the
    # buggy gradient multiplies sigmoid by (1 + 1e-3 x). The worst element is x[2] = 2.
    x = 2.0
    true = 2 * np.log1p(np.exp(x)) / (1 + np.exp(-x))
    title = "gradcli check%3A mismatch x -> output"
    assert commands[0] == (
        f"::error file={model},title={title}::x -> output: mismatch: the analytic derivative "
        f"disagrees with finite differences beyond tolerance; worst output / x[2]: analytic "
        f"{true * (1 + 1e-3 * x):.7g}, numeric {true:.7g}"
    )
    definition = line_of(model, "def softplus")
    prefix = f"::error file={model},line={definition},title={title}::culprit: tf.custom_gradient softplus: its gradient gives "
    assert commands[1].startswith(prefix), commands[1]
    assert commands[1].endswith(f"(x -> output of {model})")
    text = summary.read_text()
    assert text.startswith("earlier step\n## gradcli check: 0 of 1 model passed\n")  # appended
    assert f"| `{model}` | fail (mismatch) | 1 |" in text
    assert f"| x | output | **mismatch** | " in text
    assert f"  - at `{model}:{definition}`: culprit: tf.custom_gradient softplus" in text


def test_github_annotations_for_errors_zero_and_fail_on(monkeypatch):
    monkeypatch.chdir(ROOT)
    broken, sign = "tests/models/syntax_error.py", "sample_models/sign_loss.py"
    run = gradcli("check", broken, sign, "--format", "github", "-q")
    assert run.exit_code == 3, run
    commands = [line for line in run.stdout.splitlines() if line.startswith("::")]
    bad = line_of(broken, "def model")
    cut = line_of(sign, "tf.sign(")
    (pair,) = gradcli("check", sign, "--json").result["models"][0]["pairs"]
    resolution = f"{pair['resolution']:.3g}"  # the zero verdict states what it could resolve
    zero = ("w -> output: the derivative is identically zero: nothing can be learned through "
            f"this path (analytic exactly 0; numeric within its resolution {resolution}, up to 0); "
            f"the path is cut by tf.sign (zero gradient) at {sign}:{cut}")
    assert commands == [
        f"::error file={broken},line={bad},title=gradcli check%3A could not check::{broken}:{bad}: "
        "syntax error: expected ':'",
        f"::warning file={sign},line={cut},title=gradcli check%3A zero::{zero}",  # at tf.sign's line
    ]
    run = gradcli("check", sign, "--format", "github", "--fail-on", "zero")
    assert run.exit_code == 1, run
    commands = [line for line in run.stdout.splitlines() if line.startswith("::")]
    title = "gradcli check%3A zero w -> output"
    assert commands == [
        f"::error file={sign},title={title}::w -> output: zero: {zero[len('w -> output: '):]} (fails: fail_on lists zero)",
        f"::error file={sign},line={cut},title={title}::tf.sign (zero gradient) (w -> output of {sign})",
    ]


def test_github_annotation_when_the_run_cannot_start():
    run = gradcli("check", sample("square.py"), "--set", "x=[1,", "--format", "github")
    assert run.exit_code == 2, run
    message = run.stderr.strip().removeprefix("Error: ")
    assert run.stdout == f"::error title=gradcli check::{message}\n"


def test_format_json_is_the_json_shorthand():
    run = gradcli("check", sample("square.py"), "--format", "json")
    assert run.exit_code == 0 and run.result["models"][0]["ok"] is True, run
    run = gradcli("check", sample("square.py"), "--format", "github", "--json")
    assert (run.exit_code, run.stderr.strip()) == (
        2, "Error: --json and --format github: choose one (see 'gradcli check --help')"), run


# --- pre-commit ---------------------------------------------------------------------


def test_pre_commit_hook_names_a_real_entry_point(monkeypatch):
    import re
    import shlex
    import tomllib

    import yaml

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gradcli-check" and hook["language"] == "python"
    assert hook.get("pass_filenames", True) and hook["require_serial"] is True
    program, *args = shlex.split(hook["entry"])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "gradcli.cli:main"
    files = re.compile(hook["files"])
    assert files.search("sample_models/square.py") and files.search("models/net.py")
    assert not files.search("gradcli/cli/check.py") and not files.search("models/data.json")
    # pre-commit appends the changed files to the entry: that command line must run.
    monkeypatch.chdir(ROOT)
    run = gradcli(*args, "sample_models/square.py", "sample_models/sign_loss.py")
    assert run.exit_code == 0 and "2 of 2 models passed" in run.stdout, run


# --- --plot -------------------------------------------------------------------------


def test_block_window_is_centred_on_the_worst_element():
    import numpy as np

    from gradcli.analyses.check import block_window
    from gradcli.results import Tolerance

    numeric = np.arange(200 * 300, dtype=float).reshape(200, 300) / 1000.0
    analytic = numeric.copy()
    analytic[150, 290] += 1.0  # the one wrong element
    window = block_window(analytic, numeric, np.zeros_like(numeric), Tolerance(1e-6, 1e-9, "test"), size=64)
    # Rows 150 - 32 = 118 onwards; columns clipped to the block: 300 - 64 = 236.
    assert (window.row_offset, window.col_offset, window.rows, window.columns) == (118, 236, 200, 300)
    assert window.analytic.shape == window.numeric.shape == window.failing.shape == (64, 64)
    assert list(zip(*np.nonzero(window.failing))) == [(32, 54)]
    assert np.array_equal(window.numeric, numeric[118:182, 236:300])


def test_check_plot_draws_the_failing_pair(tmp_path):
    import numpy as np
    from matplotlib.image import imread

    png = tmp_path / "check.png"
    run = gradcli("check", sample("buggy_custom_gradient.py"), "--plot", png, "--json")
    assert run.exit_code == 1, run
    assert run.stderr.strip() == f"plotted 1 failing pair to {png}", run
    image = imread(png)
    assert image.shape == (360, 1300, 4)  # figsize (13, 3.6) at 100 dpi, RGBA
    assert image[..., :3].std() > 0.05  # not blank
    # The blocks it drew, against the closed form: df/dx = 2 softplus(x) sigmoid(x),
    # and the model's gradient multiplies sigmoid by (1 + 1e-3 x).
    window = run.result["models"][0]["pairs"][0]["window"]
    x = np.array([-1.5, 0.25, 2.0])
    true = 2 * np.log1p(np.exp(x)) / (1 + np.exp(-x))
    np.testing.assert_allclose(window["analytic"], [true * (1 + 1e-3 * x)], rtol=1e-12)
    np.testing.assert_allclose(window["numeric"], [true], rtol=1e-8)
    assert window["failing"] == [[True, True, True]]


def test_check_plot_without_a_failure_writes_nothing(tmp_path):
    png = tmp_path / "none.png"
    run = gradcli("check", sample("square.py"), "--plot", png)
    assert run.exit_code == 0 and not png.exists(), run
    assert run.stderr.strip() == f"no failing pair with a Jacobian block to plot: {png} not written"


def test_jacobian_plot(tmp_path):
    from matplotlib.image import imread

    png = tmp_path / "jacobian.png"
    run = gradcli("jacobian", sample("two_by_two.py"), "--plot", png)
    assert run.exit_code == 0, run
    assert run.stderr.strip() == f"plotted 4 Jacobian blocks to {png}"
    image = imread(png)
    assert image.shape == (800, 1440, 4)  # 2 x 3 panels of (4.8, 4.0) inches at 100 dpi
    assert image[..., :3].std() > 0.05
    run = gradcli("jacobian", sample("two_by_two.py"), "--plot", tmp_path / "j.jpg")
    assert run.exit_code == 2 and "must end in .png" in run.stderr, run


# --- progress -----------------------------------------------------------------------


def _recorder():
    events = []
    return events, lambda stage, done, total, detail: events.append((stage, done, total))


def test_finite_differences_report_each_chunk():
    import numpy as np
    import tensorflow as tf

    from gradcli.numerics.finite_diff import FiniteDifferences
    from gradcli.progress import listening

    x = np.linspace(-1.0, 1.0, 7)
    fd = FiniteDifferences(lambda v: {"y": tf.sin(v["x"])}, {"x": x}, ["y"], wrt=["x"], chunk=3)
    events, listener = _recorder()
    with listening(listener):
        derivatives = fd.along_axes("x")
    # Without a settling rule every direction takes both passes, each reported.
    assert events == [
        (stage, done, 7)
        for stage in ("finite differences", "finite differences, second level")
        for done in (0, 3, 6, 7)
    ]
    # Chunking changes nothing: d sin(x_i) / d x_j = cos(x_i) on the diagonal.
    np.testing.assert_allclose(derivatives.values["y"], np.diag(np.cos(x)), atol=1e-9)


def test_lanczos_reports_every_product_and_ends():
    import numpy as np

    from gradcli.analyses.hessian import lanczos_extremes
    from gradcli.progress import listening

    diagonal = np.arange(1.0, 201.0)  # eigenvalues 1..200: the extremes are known
    events, listener = _recorder()
    with listening(listener):
        found = lanczos_extremes(lambda v: diagonal * v, 200, 2, rng=np.random.default_rng(0))
    np.testing.assert_allclose(found.values, [1, 2, 199, 200], rtol=1e-8)
    assert [done for _, done, total in events[:-1]] == list(range(1, found.matvecs + 1))
    assert all(total is None for _, _, total in events[:-1])
    assert events[-1] == ("Lanczos", found.matvecs, found.matvecs)


def test_region_sampling_reports_each_point():
    import gradcli as api
    from gradcli.progress import listening

    events, listener = _recorder()
    with listening(listener):
        result = api.hessian(sample("least_squares.py"), samples=3, radius=0.5, fd_check=False)
    assert result.sampling.n_negative == 0  # 2 A^T A: convex everywhere
    assert [e for e in events if e[0] == "region sampling"] == [
        ("region sampling", done, 3) for done in range(4)
    ]


class _Terminal:
    def __init__(self):
        import io

        self.buffer = io.StringIO()

    def write(self, text):
        return self.buffer.write(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_stage_rows_appear_after_a_second_and_leave_when_done():
    from rich.progress import Progress

    from gradcli.render.progress import SHOW_AFTER, Stages

    now = [0.0]
    bar = Progress()
    stages = Stages(bar, clock=lambda: now[0])
    stages("finite differences", 0, 10, "x")
    now[0] = SHOW_AFTER / 2
    stages("finite differences", 2, 10, "x")
    assert bar.tasks == []  # quick work gets no row
    now[0] = SHOW_AFTER * 1.5
    stages("finite differences", 4, 10, "x")
    (task,) = bar.tasks
    assert (task.fields["what"], task.completed, task.total, task.description) == ("finite differences", 4, 10, "x")
    stages("finite differences", 10, 10, "x")
    assert bar.tasks == []


def test_stage_bar_shows_elapsed_and_remaining(monkeypatch):
    import gradcli.render.progress as render_progress
    from gradcli.progress import report

    monkeypatch.setattr(render_progress, "SHOW_AFTER", 0.0)
    terminal = _Terminal()
    with render_progress.progress_callback(total=1, stream=terminal) as batch:
        assert batch is None  # one model: no batch row
        report("Lanczos", 0, 40, "residual")
        report("Lanczos", 10, 40, "residual")
    text = terminal.buffer.getvalue()
    assert "Lanczos" in text and "10/40" in text and "left" in text and "0:00:0" in text
    plain = _Terminal()
    plain.isatty = lambda: False
    with render_progress.progress_callback(total=1, stream=plain):
        report("Lanczos", 5, 40)
    assert plain.buffer.getvalue() == ""
