"""Isolation between the models of a batch, and from the caller.

Truth: each fixture says what it does to its process (tests/models/iso_*.py:
an alarm, a changed working directory / numpy error state / warnings filter,
a thread that calls os._exit, processes left running), and iso_ok.py is
y = x * x, whose Jacobian diag(2x) every check must accept, so every row of a
batch of them must pass. Processes are checked by PID in /proc after the run.
The worker-level tests run tasks that import no TensorFlow
(tests/models/_iso_tasks.py) through ``supervise``, so they cost an interpreter
start-up, not TensorFlow's import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES, ROOT, error_line, gradcli, sample

TASKS = "tests.models._iso_tasks"


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pids, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def read_pids(path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"), reason="PIDs are looked up in /proc")


# --- one batch, one worker: what a model leaves must not reach the next -------


@needs_proc
def test_a_correct_model_passes_after_each_model_that_spoils_its_worker(tmp_path):
    (tmp_path / "iso_point.json").write_text("[1.0, 2.0]")
    temp = tmp_path / "temp"
    temp.mkdir()
    pids = tmp_path / "pids"
    models = [
        "iso_alarm.py", "iso_ok.py:after_alarm", "iso_state.py", "iso_ok.py:after_state",
        "iso_thread_exit.py", "iso_ok.py:after_thread", "iso_spawn.py", "iso_ok.py:after_spawn",
    ]
    env = {k: v for k, v in os.environ.items() if k != "GRADCLI_IN_PROCESS"}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(temp), GRADCLI_ISO_PIDS=str(pids))
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "check", "--json", *(str(FIXTURES / m) for m in models)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    shown = f"exit={done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    rows = json.loads(done.stdout)["result"]["models"]
    assert [row["name"] for row in rows] == [str(FIXTURES / m) for m in models], shown
    assert [row["error"] for row in rows] == [None] * len(models), shown
    assert all(row["ok"] for row in rows) and done.returncode == 0, shown
    # Every process iso_spawn.py started ended with the run, and the worker's
    # temporary folder (where autograph writes converted code) went with it.
    assert len(read_pids(pids)) == 4 and gone(read_pids(pids)), shown
    assert list(temp.iterdir()) == [], shown


def supervised(tasks, jobs=1, timeout=None) -> list:
    from gradcli.workers.batch import supervise

    outcomes = supervise([(f"{TASKS}:{name}", tuple(args)) for name, *args in tasks], jobs, timeout)
    try:
        return [outcome for _, outcome in outcomes]
    finally:
        outcomes.close()


def test_state_a_task_changes_is_restored_before_the_next(tmp_path):
    before, _, spun, after = supervised(
        [("state",), ("change_state", str(tmp_path)), ("spin", 2.0), ("state",)]
    )
    assert spun == 2.0  # neither the CPU limit nor faulthandler's timer ended the worker
    assert after == before  # the same worker (same pid), as it was
    assert before["cwd"] == os.getcwd() and before["mark"] is None and before["usr1"] and before["sum"]
    assert before["json"] and str(tmp_path) not in before["path"]


def test_a_thread_left_running_retires_the_worker_and_the_next_task_is_answered():
    started, waited, answered = supervised([("exit_later", 0.5), ("wait", 1.0), ("state",)])
    assert (started, waited) == ("started", 1.0)
    assert isinstance(answered, dict)


def test_a_pending_alarm_is_cancelled():
    assert supervised([("alarm",), ("wait", 1.5)]) == ["alarm", 1.5]


@needs_proc
@pytest.mark.parametrize("jobs", [1, 2])
def test_processes_a_task_starts_end_with_it(tmp_path, jobs):
    pids = tmp_path / "pids"
    results = supervised([("spawn", str(pids)), ("wait", 0.1)], jobs=jobs)
    assert results[1] == 0.1 and sorted(results[0]) == sorted(read_pids(pids))
    assert gone(read_pids(pids))


@needs_proc
def test_processes_of_a_task_stopped_by_the_timeout_end_with_it(tmp_path):
    from gradcli.workers.batch import WorkerLost

    pids = tmp_path / "pids"
    hung, waited = supervised([("spawn", str(pids), True), ("wait", 0.1)], jobs=2, timeout=4.0)
    assert isinstance(hung, WorkerLost) and "did not finish within 4 s" in hung.message
    assert waited == 0.1
    assert len(read_pids(pids)) == 3 and gone(read_pids(pids))


def test_the_timeout_counts_the_tasks_run_not_the_import_of_its_code():
    """A worker's start-up (importing TensorFlow: seconds, more on a busy machine)
    is not the model's time: a task whose module takes 2 s to import and then runs
    for 0.2 s finishes under a 1 s timeout; one that runs 3 s is stopped."""
    from gradcli.workers.batch import WorkerLost, supervise

    slow = "tests.models._iso_slow_import:quick"
    outcomes = supervise([(slow, (0.2,)), (slow, (3.0,))], 1, timeout=1.0)
    try:
        quick, hung = [outcome for _, outcome in outcomes]
    finally:
        outcomes.close()
    assert quick == 0.2
    assert isinstance(hung, WorkerLost) and "did not finish within 1 s" in hung.message


def test_a_worker_that_never_starts_its_task_is_stopped_with_its_own_message(monkeypatch):
    """A task whose code does not finish importing (here 2 s, against a start-up
    limit of 0.5 s plus the 1 s timeout) is stopped all the same: not blamed
    on the model, which never ran, and the next task still runs."""
    from gradcli.workers import batch
    from gradcli.workers.batch import WorkerLost, supervise

    monkeypatch.setattr(batch, "START_SECONDS", 0.5)
    outcomes = supervise([("tests.models._iso_slow_import:quick", (0.1,)), (f"{TASKS}:wait", (0.1,))],
                         1, timeout=1.0)
    try:
        stuck, waited = [outcome for _, outcome in outcomes]
    finally:
        outcomes.close()
    assert isinstance(stuck, WorkerLost)
    assert stuck.message == "internal error: a worker process did not start within 1.5 s, before the model ran"
    assert waited == 0.1


@needs_proc
def test_a_worker_left_running_at_exit_takes_its_processes_and_folder_with_it(tmp_path):
    # A caller that never closes the generator: multiprocessing ends the
    # daemonic worker (SIGTERM) when the caller exits.
    temp, pids = tmp_path / "temp", tmp_path / "pids"
    temp.mkdir()
    script = tmp_path / "caller.py"
    script.write_text(
        "import time\n"
        "from gradcli.workers.batch import supervise\n"
        "if __name__ == '__main__':\n"
        f"    outcomes = supervise([('{TASKS}:wait', (0.1,)), ('{TASKS}:spawn', ({str(pids)!r}, True))], 2)\n"
        "    print(next(outcomes))\n"
        f"    while not __import__('os').path.exists({str(pids)!r}):\n"
        "        time.sleep(0.05)\n"
        "    time.sleep(0.2)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "(0, 0.1)", done.stdout + done.stderr
    assert len(read_pids(pids)) == 3 and gone(read_pids(pids))
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("task", ["fail", "unpicklable"])
def test_a_failure_of_gradcli_in_a_worker_is_an_internal_error_not_the_models_doing(task):
    from gradcli.workers.batch import Raised

    (outcome,) = supervised([(task,)])
    assert isinstance(outcome, Raised), outcome
    assert str(outcome.error).startswith("internal error: ") and "ended the process" not in str(outcome.error)


def test_a_worker_that_cannot_start_is_an_internal_error_not_the_models_doing():
    # spawn re-runs the parent's __main__ in each worker: a script read from
    # stdin has no file to re-run, so the worker dies before any task.
    script = (
        "from gradcli.workers.batch import supervise\n"
        f"print([o.message for _, o in supervise([('{TASKS}:wait', (0.1,))], 1)])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-"], input=script, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == (
        "['internal error: a worker process ended while starting (exit code 1), before the model ran']"
    ), done.stdout + done.stderr


# --- the Python API leaves the caller's random streams alone -----------------


def draws():
    import random

    import tensorflow as tf

    return random.random(), float(np.random.rand()), float(tf.random.uniform([]))


def test_the_api_leaves_the_callers_random_streams_and_keras_names_alone():
    import random

    import keras
    import tensorflow as tf

    import gradcli

    def seeded():
        random.seed(11)
        np.random.seed(11)
        tf.random.set_seed(11)

    keras.layers.Dense(2, name="iso_first")
    counter = keras.layers.Dense(2).name  # the caller's name counter, e.g. dense_4
    seeded()
    expected = draws()
    seeded()
    result = gradcli.check(sample("keras_mlp.py"))
    assert result.ok, result
    assert draws() == expected
    number = int(counter.rsplit("_", 1)[1]) if "_" in counter else 0
    assert keras.layers.Dense(2).name == f"dense_{number + 1}"  # not reset to "dense"


def test_the_api_inside_a_tf_function_is_a_usage_error():
    import tensorflow as tf

    import gradcli
    from gradcli.errors import UsageError

    @tf.function
    def traced(x):
        return gradcli.check(lambda x: x * x, inputs={"x": [1.0]}).ok

    with pytest.raises(UsageError, match=r"gradcli.check\(\) runs the model eagerly .* tf.function"):
        traced(tf.constant(1.0))


# --- values, folders and names ---------------------------------------------


@pytest.mark.parametrize("suffix", ["npz:x", "npz", "npy"])
def test_an_object_array_given_as_a_value_is_exit_2(tmp_path, suffix):
    array = np.array([1.0, "a", None], dtype=object)
    path = tmp_path / f"objects.{suffix.split(':')[0]}"
    np.savez(path, x=array) if path.suffix == ".npz" else np.save(path, array)
    run = gradcli("check", str(sample("square.py")), "--set", f"x=@{tmp_path / 'objects'}.{suffix}")
    assert run.exit_code == 2, run
    assert "Object arrays cannot be loaded" in error_line(run)


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "a.py").write_text(Path(sample("square.py")).read_text())
    (folder / "conftest.py").write_text("raise SystemExit('conftest.py is not a model')\n")
    os.symlink("user@host.1234:1700000000", folder / ".#a.py")  # an editor's lock link
    os.symlink("missing.py", folder / "dangling.py")
    (folder / "_helpers.py").write_text("raise SystemExit('private')\n")
    return folder


def test_a_folder_stands_for_its_model_files_only(model_folder):
    from gradcli.model.paths import expand_models

    assert expand_models([str(model_folder)]) == [str(model_folder / "a.py")]
    run = gradcli("check", str(model_folder), "--json")
    assert run.exit_code == 0, run
    assert [m["name"] for m in run.result["models"]] == [str(model_folder / "a.py")]


def test_one_file_named_several_ways_is_checked_once_and_lands_in_one_shard(model_folder, monkeypatch):
    from gradcli.model.paths import expand_models, shard_models

    monkeypatch.chdir(model_folder.parent)
    names = ["models/a.py", "./models/a.py", "models//a.py", "models", str(model_folder / "a.py")]
    assert expand_models(names) == ["models/a.py"]
    assert expand_models(["./models/a.py", "models/a.py:model"]) == ["models/a.py", "models/a.py:model"]
    specs = expand_models(names)
    assert sum(len(shard_models(specs, k, 2)) for k in (1, 2)) == 1
    run = gradcli("check", *names[:2], "--json")
    assert run.exit_code == 0, run
    assert [m["name"] for m in run.result["models"]] == ["models/a.py"]


@pytest.mark.parametrize("name", ["../x", "/abs", "a/./b", "a//b", ""])
def test_a_save_member_name_that_leaves_its_folder_is_refused(name):
    from gradcli.errors import UsageError
    from gradcli.render.files import check_member_name

    with pytest.raises(UsageError, match="cannot be the name of a member"):
        check_member_name(name, "out.npz")


def test_save_refuses_an_unsafe_output_name_and_writes_nothing(tmp_path):
    model = tmp_path / "names.py"
    model.write_text(
        'inputs = {"x": [1.0, 2.0]}\n\n\ndef model(x):\n    return {"../escape": x * x, "ok/inside": x}\n'
    )
    out = tmp_path / "out.npz"
    run = gradcli("forward", str(model), "--save", str(out))
    assert run.exit_code == 2, run
    assert "'../escape' cannot be the name of a member" in run.stderr.splitlines()[-1]
    assert not out.exists()


# --- the memory guard holds for the re-check of a failing fast check ---------


def test_a_failing_fast_check_too_large_to_recheck_reports_the_fast_result():
    import gradcli

    result = gradcli.check(str(FIXTURES / "iso_wrong_wide.py"), mode="fast", max_memory=10**6)
    (pair,) = result.models[0].pairs
    assert pair.failed and pair.mode == "fast" and result.exit_code == 1
    note = " ".join(pair.warnings)
    assert "element-wise re-check (2000 x 2000 blocks) would need about 128 MB" in note, note
    # Each probe's analytic value is 3/2 of the numeric one: the gradient is 3x, the truth 2x.
    ratios = [e.analytic / e.numeric for e in pair.failing]
    assert len(ratios) == 3 and np.allclose(ratios, 1.5, rtol=1e-6), ratios


# --- TensorFlow's kernel cache: cleared only for a model that needs it --------


def test_a_random_function_draws_the_same_in_every_call_whatever_the_caller_ran():
    import tensorflow as tf

    import gradcli

    def noisy(x):
        return x + tf.random.uniform([3], dtype=tf.float64, seed=7)

    def error():
        return gradcli.check(noisy, (np.array([1.0, 2.0, 3.0]),)).models[0].error

    first = error()
    assert "the forward pass is nondeterministic" in first, first
    tf.random.set_seed(0)
    tf.random.uniform([3], dtype=tf.float64, seed=7)  # the cached kernel the model's op would reuse
    assert error() == first


def test_a_function_without_stateful_ops_leaves_the_callers_seeded_kernels_going_on():
    import tensorflow as tf

    import gradcli
    from gradcli.model import random_state

    def wave(x):
        return tf.sin(x) * x

    tf.random.set_seed(5)
    expected = [float(tf.random.uniform([], seed=1)) for _ in range(2)]
    tf.random.set_seed(5)
    drawn = [float(tf.random.uniform([], seed=1))]
    assert gradcli.check(wave, (np.linspace(0.1, 0.6, 6),)).ok
    drawn.append(float(tf.random.uniform([], seed=1)))
    assert drawn == expected  # as if no call had been made
    assert random_state.KERNELS["reset"]  # outside a call


def test_only_a_model_with_a_stateful_op_or_its_own_gradient_needs_fresh_kernels():
    import types

    import tensorflow as tf

    from gradcli.model.loading import load_model
    from gradcli.model.random_state import KERNELS, callers_state

    variable = tf.Variable(2.0, dtype=tf.float64)

    @tf.custom_gradient
    def own(x):
        return x * x, lambda dy: dy * 2 * x

    def reset_by(function):
        module = types.ModuleType("m")
        module.model, module.inputs = function, {"x": np.array([1.0, 2.0, 3.0])}
        with callers_state():
            load_model(module)
            return KERNELS["reset"]

    assert not reset_by(lambda x: tf.sin(x) * x)
    assert reset_by(lambda x: x * variable)
    assert reset_by(own)
    assert reset_by(lambda x: tf.function(lambda y: y * 2)(x))
