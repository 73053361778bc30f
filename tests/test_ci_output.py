"""Output a person can read in a CI log: width, one element order, -v/-q,
colour, witness files, progress lines, annotations, the job summary, plots.

Numbers are checked against closed forms written here (the ratio of error to
allowed error by hand, the derivative of sqrt(x^2 + 0.01), the Jacobian of
W @ x), never against gradcli's own output.
"""

from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import ROOT, fixture, gradcli, line_of, sample

WORKSPACE = {"GITHUB_WORKSPACE": str(ROOT)}


# -- one order: error / allowed -------------------------------------------------------


def _two_element_pair():
    """numeric [100, 1], analytic [100.001, 1.0001]; rtol 1e-6, atol 1e-9, no fd error:
    element 0: error 1e-3, allowed 1e-9 + 1e-6 * 100.001 -> ratio ~ 10.0
    element 1: error 1e-4, allowed 1e-9 + 1e-6 * 1.0001  -> ratio ~ 99.9
    so element 1 is the worst by error / allowed, element 0 by abs error."""
    from gradcli.results import Tolerance
    from gradcli.verdicts import compare

    tol = Tolerance(rtol=1e-6, atol=1e-9, rule="test")
    analytic, numeric = np.array([[100.001, 1.0001]]), np.array([[100.0, 1.0]])
    return compare.compare_block("x", "y", analytic, numeric, np.zeros((1, 2)), (), (2,), tol), tol


def test_worst_element_and_failing_list_share_the_order_error_over_allowed():
    pair, tol = _two_element_pair()
    ratios = [1e-3 / (1e-9 + 1e-6 * 100.001), 1e-4 / (1e-9 + 1e-6 * 1.0001)]
    assert ratios[1] > ratios[0] > 1
    assert pair.worst.input_index == [1]
    assert [e.input_index for e in pair.failing] == [[1], [0]]
    assert pair.max_abs_error == pytest.approx(1e-3, rel=1e-9)  # the largest, element 0's


def test_the_report_states_the_order():
    from gradcli.render.text import plain_text, render_failure, render_model
    from gradcli.results import ModelResult

    pair, tol = _two_element_pair()
    text = plain_text(lambda out: render_failure(pair, out))
    assert text.splitlines()[1] == "    2 of 2 compared elements outside tolerance; worst first, by error / allowed:"
    assert text.splitlines()[2].startswith("    y / x[1]: analytic 1.0001, numeric 1")
    model = ModelResult(name="m.py", path="m.py", dtype="float64", mode="full", tolerance=tol, pairs=[pair])
    table = plain_text(lambda out: render_model(model, out))
    assert "worst (error / allowed)" in table
    row = next(line for line in table.splitlines() if line.startswith("│ x "))
    assert "y / x[1]" in row and "0.001 " in row  # max abs err is element 0's


# -- width: names and indices never break --------------------------------------------


def test_names_and_indices_are_never_broken_in_a_narrow_or_non_terminal_console():
    from gradcli.render.text import console, render_model
    from gradcli.results import Element, ModelResult, PairResult, Tolerance

    name = "sequential_block/dense_with_a_long_name/kernel"
    worst = Element([3], [12, 7], 1.0, 1.0, 0.0, 0.0, 0.0)
    pair = PairResult(input=name, output="model_output", verdict="pass", failed=False, mode="full",
                      max_abs_error=0.0, max_rel_error=0.0, fd_error=0.0, compared=1, worst=worst)
    model = ModelResult(name="m.py", path="m.py", dtype="float64", mode="full",
                        tolerance=Tolerance(1e-6, 1e-9, "t"), pairs=[pair])
    env = {k: os.environ.pop(k) for k in ("COLUMNS",) if k in os.environ}
    try:
        buffer = io.StringIO()
        render_model(model, console(buffer))  # a log: COLUMNS unset, not a terminal
    finally:
        os.environ.update(env)
    (row,) = [line for line in buffer.getvalue().splitlines() if line.startswith("│ ")]
    # this row is 180 characters wide: at 80 or 120 columns its cells would wrap
    assert f"│ {name} │ model_output │" in row
    assert f"│ model_output[3] / {name}[12, 7] │" in row
    env = {k: os.environ.pop(k) for k in ("COLUMNS",) if k in os.environ}
    try:
        assert console(io.StringIO()).width == 200  # a log: the wide default
        os.environ["COLUMNS"] = "133"
        assert console(io.StringIO()).width == 133  # COLUMNS wins
    finally:
        os.environ.pop("COLUMNS", None)
        os.environ.update(env)


# -- -v / -q and plural forms -------------------------------------------------------


def test_routine_notes_need_v_and_counts_are_singular_for_one():
    quiet = gradcli("check", sample("square.py"), "--mode", "auto")
    assert quiet.exit_code == 0, quiet
    assert "note:" not in quiet.stdout
    assert quiet.stdout.splitlines()[-1] == "1 of 1 model passed"
    verbose = gradcli("check", sample("square.py"), "-v")
    assert verbose.exit_code == 0, verbose
    assert "  note: auto ran the full check: its first pass is one batch per input group" in verbose.stdout.splitlines()


def test_every_command_has_verbosity_and_colour_options():
    from gradcli.cli import cli

    for name, command in cli.commands.items():
        flags = {opt for p in command.params for opt in p.opts + p.secondary_opts}
        assert {"-v", "--verbose", "-q", "--quiet", "--color", "--no-color"} <= flags, name


def test_colour_follows_the_flag_then_no_color_then_force_color(monkeypatch):
    from rich.text import Text

    from gradcli.render.text import console

    def drawn(color=None):
        buffer = io.StringIO()
        console(buffer, color=color).print(Text("pass", style="green"))
        return buffer.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert drawn() == "pass\n"  # not a terminal: no colour
    assert "\x1b[32m" in drawn(color=True)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[32m" in drawn()
    assert drawn(color=False) == "pass\n"
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[32m" not in drawn()


def test_unknown_config_key_suggests_the_close_one(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nrtoll = 1e-3\n")
    monkeypatch.chdir(tmp_path)
    run = gradcli("check", sample("square.py"))
    assert run.exit_code == 2, run
    assert run.stderr.startswith(
        "Error: pyproject.toml [tool.gradcli] rtoll: not an option of gradcli check; did you mean 'rtol'? (known: "
    ), run
    typo = gradcli("check", sample("square.py"), "--rtl", "3")
    assert typo.exit_code == 2 and "Did you mean" in typo.stderr, typo


# -- witness points --------------------------------------------------------------------


def test_a_large_witness_goes_to_a_file_that_reproduces_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = fixture("ciout_sweep_wide.py")
    run = gradcli("check", model, "--samples", "3", "--radius", "1")
    assert run.exit_code == 1, run
    assert "    reproduce it alone with: --set x=@ciout_sweep_wide.witness.npz:x" in run.stdout.splitlines()
    assert "witness point written to ciout_sweep_wide.witness.npz (x)" in run.stderr.splitlines()
    x = np.load(tmp_path / "ciout_sweep_wide.witness.npz")["x"]
    assert x.shape == (12,)
    # closed form: the true derivative x / sqrt(x^2 + 0.01) against the shortcut sign(x)
    near = np.abs(x) < 0.25
    assert near.any()
    true, shortcut = x / np.sqrt(x**2 + 0.01), np.sign(x)
    assert np.max(np.abs(true - shortcut)[near]) > 1e-2
    again = gradcli("check", model, "--set", "x=@ciout_sweep_wide.witness.npz:x", "--mode", "full")
    assert again.exit_code == 1, again


def test_a_small_witness_stays_inline():
    from gradcli.render.witness import set_arguments, witness_path

    assert set_arguments({"x": [0.5, -1.25]}, "m/model.py") == ["--set 'x=[0.5,-1.25]'"]
    assert set_arguments({"w": np.zeros((3, 3))}, "m/model.py:net") == ["--set w=@model.net.witness.npz:w"]
    assert witness_path("saved/net.keras") == "net.witness.npz"


# -- progress ----------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_log_progress_lines_and_the_up_front_estimate():
    from gradcli.render.progress import LogStages

    stream, clock = io.StringIO(), Clock()
    stages = LogStages(stream, clock)
    detail = "W, input 3 of 6 (every element)"
    stages("finite differences", 0, 600, detail)
    clock.now = 3.0
    stages("finite differences", 10, 600, detail)  # 600 in 180 s: announced, not yet logged
    clock.now = 11.0
    stages("finite differences", 40, 600, detail)
    clock.now = 15.0
    stages("finite differences", 60, 600, detail)  # within LOG_EVERY: nothing
    clock.now = 30.0
    stages("finite differences", 600, 600, detail)
    assert stream.getvalue().splitlines() == [
        "note: finite differences for W, input 3 of 6 (every element) predicted to take about 3 min "
        "(10 of 600 done in 3.0 s); --mode fast checks random projections in a fraction of that "
        "(or --mode auto --budget SECONDS)",
        "progress: finite differences: 40 of 600, 11.0 s, about 3 min left (W, input 3 of 6 (every element))",
        "progress: finite differences: done, 30.0 s (W, input 3 of 6 (every element))",
    ]
    quick = io.StringIO()
    stages = LogStages(quick, Clock())
    stages("Lanczos", 0, None, "")
    stages("Lanczos", 5, 5, "")
    assert quick.getvalue() == ""  # quick work: no line


def test_a_stage_that_reports_nothing_for_a_while_still_gets_its_lines():
    """Between reports the clock thread ticks: work counted in no steps (a
    model loading) gets a line at LOG_AFTER and then one every LOG_EVERY, and
    a counted stage stuck in one long chunk says where it is, with no time
    left it could not know."""
    from gradcli.render.progress import LOG_AFTER, LOG_EVERY, LogStages

    stream, clock = io.StringIO(), Clock()
    stages = LogStages(stream, clock)
    stages("loading", 0, None, "m.py")
    stages("finite differences", 0, 4, "W, input 1 of 1 (every element)")
    for now in (1.0, LOG_AFTER - 0.5, LOG_AFTER + 0.5, LOG_AFTER + 2.0, LOG_AFTER + LOG_EVERY + 1.0):
        clock.now = now
        stages.tick()
    clock.now = 25.0
    stages("loading", 1, 1, "m.py")
    stages.tick()
    first, second = LOG_AFTER + 0.5, LOG_AFTER + LOG_EVERY + 1.0
    assert stream.getvalue().splitlines() == [
        f"progress: loading: {first:.1f} s (m.py)",
        f"progress: finite differences: 0 of 4, {first:.1f} s (W, input 1 of 1 (every element))",
        f"progress: loading: {second:.1f} s (m.py)",
        f"progress: finite differences: 0 of 4, {second:.1f} s (W, input 1 of 1 (every element))",
        "progress: loading: done, 25.0 s (m.py)",
    ]


def test_a_step_that_runs_past_the_pace_of_the_others_is_said_to():
    """The time left of a counted stage is the pace of the steps done, counted
    down while the next runs; a step that runs past that pace (a failing
    layer re-checked element by element) is said to run, with the time left
    after it, where dividing the elapsed time by the steps done made the
    time left grow while nothing was left but that step."""
    from gradcli.render.progress import LOG_AFTER, LOG_EVERY, LogStages

    stream, clock = io.StringIO(), Clock()
    stages = LogStages(stream, clock)
    stages("layers", 0, 5, "estimated 50 s")
    clock.now = LOG_AFTER + 1.0
    stages("layers", 1, 5, "l0")  # 11 s a layer: 4 more take about 44 s
    stages("layers", 1, 5, "l1; estimated 50 s up front")  # the second starts
    for now in (LOG_AFTER + 1.5, LOG_AFTER + LOG_EVERY + 1.5, LOG_AFTER + 2 * LOG_EVERY + 2.0):
        clock.now = now
        stages.tick()
    assert stream.getvalue().splitlines() == [
        "progress: layers: 1 of 5, 11.0 s, about 44 s left (l0)",
        "progress: layers: 1 of 5, 21.5 s, about 34 s left (l1; estimated 50 s up front)",
        "progress: layers: 1 of 5, 32.0 s, the running one 21 s so far, about 33 s left after it "
        "(l1; estimated 50 s up front)",
    ]


def test_on_a_terminal_the_time_left_stops_at_what_is_left_after_the_running_step():
    """The bar's time left counts down between reports to the time left after
    the step now running, marked "+", not to 0:00:00 while that step runs on."""
    from rich.progress import Progress

    from gradcli.render.progress import Stages, left_column

    clock = Clock()
    bar = Progress()
    stages = Stages(bar, clock)
    column = left_column(clock)
    stages("layers", 0, 5, "estimated 50 s")
    clock.now = 11.0
    stages("layers", 1, 5, "l0")  # 11 s a layer: 4 more take about 44 s
    (task,) = bar.tasks
    shown = []
    for now in (11.0, 21.5, 32.0, 60.0):
        clock.now = now
        shown.append(column.render(task).plain)
    assert shown == ["0:00:44", "0:00:34", "0:00:33+", "0:00:33+"]


def test_failing_inputs_re_checked_element_by_element_are_a_stage_of_their_own():
    """A fast check's element-wise re-checks of its failing inputs report a
    stage counted in inputs, each named, ended once: in a layer pass they
    are what a failing unit spends its time on, and a line says so."""
    import numpy as np
    import tensorflow as tf

    import gradcli
    from gradcli import progress
    from gradcli.analyses.check.fast import RECHECK_STAGE

    @tf.custom_gradient
    def product(a, b):
        return a * b, lambda dy: (dy * b * 1.5, dy * a * 0.5)  # both wrong

    def f(a, b):
        return tf.reduce_sum(product(a, b) ** 2)

    reports = []
    with progress.listening(lambda stage, done, total, detail: reports.append((stage, done, total, detail))):
        result = gradcli.check(f, inputs={"a": np.linspace(0.1, 0.9, 9), "b": np.linspace(1.0, 2.0, 9)},
                               mode="fast")
    assert sorted(p.input for p in result.models[0].pairs if p.failed) == ["a", "b"]
    rechecks = [r[1:] for r in reports if r[0] == RECHECK_STAGE]
    names = [detail for _, _, detail in rechecks]
    assert [(done, total) for done, total, _ in rechecks] == [(0, 2), (1, 2), (1, 2), (2, 2)]
    assert names == ["a", "a", "b", "b"]


def test_a_stage_that_reports_nothing_gets_its_row_on_a_terminal():
    from rich.progress import Progress

    from gradcli.render.progress import SHOW_AFTER, Stages

    clock = Clock()
    bar = Progress()
    stages = Stages(bar, clock)
    stages("tracing", 0, None, "m.py")
    clock.now = SHOW_AFTER / 2
    stages.tick()
    assert bar.tasks == []  # quick work gets no row
    clock.now = SHOW_AFTER * 1.5
    stages.tick()
    (task,) = bar.tasks
    assert (task.fields["what"], task.total, task.description) == ("tracing", None, "m.py")
    stages("tracing", 1, 1, "m.py")
    assert bar.tasks == []


def test_the_clock_thread_logs_a_silent_stage_and_stops_with_the_display(monkeypatch):
    import threading
    import time

    import gradcli.render.progress as render_progress
    from gradcli import progress

    monkeypatch.setattr(render_progress, "LOG_AFTER", 0.2)
    monkeypatch.setattr(render_progress, "LOG_EVERY", 10.0)
    stream = io.StringIO()
    with render_progress.progress_callback(total=1, stream=stream):
        ticking = [t for t in threading.enumerate() if t.name == "gradcli-progress-clock"]
        with progress.stage("loading", "m.py"):
            time.sleep(0.2 + 2.5 * render_progress.TICK)  # reports nothing meanwhile
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("progress: loading: ") and lines[0].endswith(" s (m.py)"), lines
    assert lines[1].startswith("progress: loading: done, "), lines
    assert len(ticking) == 1 and not ticking[0].is_alive()


def test_a_check_reports_its_whole_model_stages_each_once_and_each_ends():
    """A failing model (buggy_custom_gradient.py) runs every stage; a network
    with a layer pass (by_layer_functional.py) checks each layer with the
    same code, and its units report none of the whole model's stages: the
    pass is the "layers" stage."""
    import gradcli
    from gradcli import progress

    whole = ("loading", "tracing", "reverse mode", "forward mode", "custom gradients over a spread", "diagnosis")
    for model, options, expected in (
        (sample("buggy_custom_gradient.py"), {}, whole),
        (fixture("by_layer_functional.py"), {"by_layer": True}, ("loading", "tracing", "layers", "diagnosis")),
    ):
        reports = []
        with progress.listening(lambda stage, done, total, detail: reports.append((stage, done, total))):
            gradcli.check(model, **options)
        starts = [stage for stage, done, total in reports if done == 0 and stage in whole + ("layers",)]
        ends = [stage for stage, done, total in reports if total is not None and done >= total and stage in starts]
        assert [s for s in starts if s in expected] == [s for s in expected if s in starts], reports
        assert set(expected) <= set(starts), starts
        assert all(starts.count(s) == 1 for s in expected if s != "layers"), starts
        assert sorted(set(starts)) == sorted(set(ends)), reports


def test_radius_means_the_same_in_check_and_hessian():
    check = gradcli("check", "--help").stdout
    hessian = gradcli("hessian", "--help").stdout
    squeeze = lambda text: " ".join(text.split())  # noqa: E731
    assert "R * max(1, |x|)" in squeeze(check) and "R * max(1, |x|)" in squeeze(hessian)
    assert "(required there)" in squeeze(hessian)


# -- GitHub annotations, summary, JUnit, plot ------------------------------------------------


def test_a_passing_warning_is_annotated_at_the_line_that_cuts_the_path():
    model = fixture("ciout_round_cut.py")
    run = gradcli("check", model, "--format", "github", env=WORKSPACE)
    assert run.exit_code == 0, run
    line = line_of(model, "CUT")
    (annotation,) = [a for a in run.stdout.splitlines() if a.startswith("::")]
    assert annotation.startswith(
        f"::warning file=tests/models/ciout_round_cut.py,line={line},title=gradcli check%3A disconnected::"
        "x -> output: TensorFlow returns no gradient (None) for this input"
    ), annotation


def test_multi_line_messages_are_encoded_not_cut():
    from gradcli.render.github import command, repository_path

    assert command("error", "first\nsecond: 100%", title="t: a,b") == "::error title=t%3A a%2Cb::first%0Asecond: 100%25"
    assert repository_path(str(ROOT / "tests" / "models" / "x.py")) in ("tests/models/x.py", str(ROOT / "tests/models/x.py"))


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ciout")
    paths = {k: folder / name for k, name in (("plot", "j.png"), ("xml", "r.xml"), ("md", "s.md"))}
    run = gradcli(
        "check", sample("square.py"), fixture("ciout_matrix_bug.py"), "--mode", "full",
        "--plot", paths["plot"], "--junit-xml", paths["xml"], "--summary", paths["md"], env=WORKSPACE,
    )
    return run, paths


def test_matrix_failure_names_the_element_and_exits_1(matrix_run):
    run, _ = matrix_run
    assert run.exit_code == 1, run
    # dy_i/dW_jk = [i == j] x_k: analytic 1.5 * x[2] = 3, numeric x[2] = 2 at y[1] / W[1, 2]
    assert "    output[1] / W[1, 2]: analytic 3, numeric 2 (abs err 1, rel err 0.333" in run.stdout
    assert run.stdout.splitlines()[-1] == "1 of 2 models passed"


def test_summary_folds_passing_models(matrix_run):
    _, paths = matrix_run
    text = paths["md"].read_text()
    assert text.startswith("## gradcli check: 1 of 2 models passed\n")
    assert re.search(r"^<details><summary><code>.*square\.py</code>: pass</summary>$", text, re.M), text
    assert re.search(r"^### `.*ciout_matrix_bug\.py`$", text, re.M), text
    assert text.count("<details>") == 1 and text.count("</details>") == 1


def test_junit_xml_parses_with_one_failure(matrix_run):
    _, paths = matrix_run
    root = ET.parse(paths["xml"]).getroot()
    cases = list(root.iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and "W" in failed[0].get("name"), [c.get("name") for c in cases]


def test_plot_marks_failing_elements_visibly(matrix_run):
    import matplotlib.image as mpimg

    _, paths = matrix_run
    image = mpimg.imread(paths["plot"])[..., :3]
    assert image.shape[0] > 100 and image.shape[1] > 600
    right = image[:, 2 * image.shape[1] // 3 :]  # the analytic - numeric panel
    black = np.all(right < 0.15, axis=-1)
    white = np.all(right > 0.95, axis=-1)
    assert black.sum() > 50 and white.sum() > 50  # the hollow squares and their outline


def test_plot_ticks_name_matrix_indices_and_scalars():
    from gradcli.render.plots import _heat_map, _pyplot, index_label

    assert index_label(6, (3, 4)) == "[1, 2]" and index_label(6, (12,)) == "6"
    plt = _pyplot()
    fig, (matrix, scalar) = plt.subplots(1, 2)
    _heat_map(matrix, np.arange(36.0).reshape(3, 12), "t", names=("y", "W"), shapes=((3,), (3, 4)))
    _heat_map(scalar, np.arange(12.0).reshape(1, 12), "t", names=("loss", "W"), shapes=((), (3, 4)))
    fig.canvas.draw()
    columns = [t.get_text() for t in matrix.get_xticklabels() if t.get_text()]
    assert columns and all(re.fullmatch(r"\[\d, \d\]", c) for c in columns), columns
    assert [t.get_text() for t in scalar.get_yticklabels()] == ["loss"]
    assert scalar.get_ylabel() == "output (scalar)"
    plt.close(fig)


# -- pytest plugin -------------------------------------------------------------------------


def test_plugin_failure_text_leaves_out_tensorflow_graph_nodes():
    from gradcli.pytest_plugin import without_graph_text

    message = (
        "gradcli check: error: m.py: the gradient raised: Incompatible shapes: [2] vs. [3]\n"
        "\t [[{{node gradients/mul_grad/BroadcastGradientArgs}}]] [Op:__inference_f_12]"
    )
    assert without_graph_text(message) == (
        "gradcli check: error: m.py: the gradient raised: Incompatible shapes: [2] vs. [3]"
    )


pytest_plugins = ["pytester"]


def test_plugin_turns_a_warning_verdict_into_a_pytest_warning(pytester, monkeypatch):
    import shutil

    import gradcli.analyses.check  # noqa: F401  TensorFlow before pytester's module snapshot
    from test_pytest_plugin import PLUGIN

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    models = pytester.mkdir("models")
    shutil.copy(fixture("ciout_round_cut.py"), models / "ciout_round_cut.py")
    pytester.makepyprojecttoml('[tool.gradcli]\npaths = ["models"]\n')
    result = pytester.runpytest(*PLUGIN, "--gradcli", "-m", "gradcli")
    result.assert_outcomes(passed=1, warnings=1)
    text = result.stdout.str()
    assert "GradientCheckWarning: gradcli check" in text and "disconnected x -> output" in text, text


def test_a_newline_in_a_model_file_name_is_escaped_in_every_format(tmp_path, monkeypatch):
    """``bad\\nname.py`` (the buggy softplus): the text report, the GitHub
    annotations' messages, the Markdown summary and the JUnit classname show
    it as ``bad\\\\nname.py`` on one line; the culprit bullet of the summary
    was cut in two. The annotation's file= property keeps the real name,
    in GitHub's escaping (%0A)."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(sample("buggy_custom_gradient.py"), tmp_path / "bad\nname.py")
    shown = "bad\\nname.py"
    definition = line_of(sample("buggy_custom_gradient.py"), "def softplus")
    run = gradcli("check", "bad\nname.py", "--format", "github", "--summary", "s.md", "--junit-xml", "j.xml")
    assert run.exit_code == 1, run
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"{shown}  [full, float64")
    assert not any(line.startswith("name.py") for line in lines), run.stdout
    (culprit,) = [line for line in lines if line.strip().startswith("culprit:")]
    assert culprit.endswith(f"defined at {shown}:{definition}")
    (annotation,) = [line for line in lines if line.startswith("::error") and "culprit" in line]
    assert annotation.startswith(f"::error file=bad%0Aname.py,line={definition},")
    assert annotation.endswith(f"(x -> output of {shown})")
    summary = (tmp_path / "s.md").read_text()
    assert f"  - at `{shown}:{definition}`: culprit: tf.custom_gradient softplus" in summary
    assert f"### `{shown}`" in summary and not any(l.startswith("name.py") for l in summary.splitlines())
    case = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase")
    assert case.get("classname") == shown


def test_a_pass_over_many_inputs_names_two_and_counts_the_rest():
    """A progress row of finite differences over many inputs stays one short line:
    BERT-base's 199 weights made a row of 10,783 characters. Twelve scalar inputs,
    differenced as one group, here."""
    import numpy as np

    import gradcli
    from gradcli import progress

    names = [f"weight_{i:02d}" for i in range(12)]

    def model(**values):
        import tensorflow as tf

        return tf.add_n([tf.sin(values[n]) for n in names])

    details = []
    with progress.listening(lambda stage, done, total, detail: details.append(detail)):
        result = gradcli.check(model, {n: np.float64(0.1 * i) for i, n in enumerate(names)})
    assert result.ok
    rows = [d for d in details if "weight_" in d]
    assert rows, details
    assert all(d.startswith("weight_00, weight_01 and 10 more") and len(d) < 80 for d in rows), rows
