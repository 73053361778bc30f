"""Render docs/benchmarks.md from the JSON results under bench/results/.

Every figure in the page comes from a results file: for each (size, checker)
the median over the runs of bench/check_speed.py's latest sitting (likewise
for the other benches; ``latest_sitting``), with the number of runs and the
machine's load beside it, so a reader can weigh noisy figures. Issue 36's
targets are each the latest run of its model (``targets_section``). Run after
the benches:

    python bench/check_speed.py && python bench/startup_speed.py && python bench/second_order_speed.py
    python bench/report.py
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from datetime import datetime, timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from results_io import load_results  # noqa: E402

PAGE = os.path.join(os.path.dirname(HERE), "docs", "benchmarks.md")
#: The issue's targets at 43k parameters (full vs tf, full vs torch slow).
TARGET_VS_TF, TARGET_VS_TORCH, TARGET_PROCESS = 12.0, 4.0, 8.0


#: A bench's latest sitting: its newest run and the runs before it, back to
#: the first gap longer than this between two runs. Older runs measured older
#: code, often on another machine (the warm custom gradient's median over
#: every saved run read 89 ms where the sitting's runs read 18-19 ms).
SITTING_GAP = timedelta(hours=1)


def utc(document) -> datetime:
    return datetime.fromisoformat(document["machine"]["utc"].replace("Z", "+00:00"))


def latest_sitting(documents) -> list:
    """The runs (oldest first) of the latest sitting (``SITTING_GAP``)."""
    ordered = sorted(documents, key=utc)
    start = len(ordered) - 1
    while start > 0 and utc(ordered[start]) - utc(ordered[start - 1]) <= SITTING_GAP:
        start -= 1
    return ordered[start:] if ordered else []


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec="{:.2f}"):
    return "-" if value is None else spec.format(value)


def runs_line(documents) -> str:
    if not documents:
        return ""
    loads = [
        f"{d['machine']['load_average'][0]:g} -> {d['machine'].get('load_average_end', ['?'])[0]:g}"
        for d in documents
    ]
    first, last = documents[0]["machine"]["utc"], documents[-1]["machine"]["utc"]
    return (
        f"{len(documents)} run(s), {first} to {last}, {documents[-1]['machine']['cores']} cores; "
        f"1-minute load average of each run, start -> end: {', '.join(loads)}."
    )


THREADS = {None: "Each library's default threads", 1: "One intra-op thread each (`--threads 1`)"}


def by_threads(documents) -> list:
    """Runs grouped by their ``--threads`` setting (figures of different
    settings are never pooled into one median)."""
    groups = defaultdict(list)
    for document in documents:
        groups[document.get("threads")].append(document)
    return sorted(groups.items(), key=lambda item: (item[0] is not None, item[0] or 0))


def check_speed_section(documents) -> list[str]:
    if not documents:
        return ["No results yet: run `python bench/check_speed.py`.", ""]
    cells = defaultdict(list)
    order = []
    for document in documents:
        for row in document["rows"]:
            if "not installed" in (row.get("note") or ""):  # a peer absent from that run: nothing measured
                continue
            key = (row["size"], row["params"], row["checker"])
            if key not in cells:
                order.append(key)
            cells[key].append(row)
    lines = [
        runs_line(documents), "",
        "| size | params | checker | wall s | CPU s | max error | verdict | note |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for key in order:
        rows = cells[key]
        size, params, checker = key
        verdicts = {r["verdict_right"] for r in rows}
        verdict = "skipped" if verdicts == {None} else ("right" if verdicts == {True} else "WRONG")
        lines.append(
            f"| {size} | {params} | {checker} | {fmt(median(r['seconds'] for r in rows))} | "
            f"{fmt(median(r.get('cpu_seconds') for r in rows))} | "
            f"{fmt(median(r['max_error'] for r in rows), '{:.1e}')} | {verdict} | {rows[-1]['note']} |"
        )
    lines += ["", "Ratios at each size, taken within each run (checkers of one run share its load), "
              "then the median over runs, wall (CPU); > 1 means gradcli is faster:", ""]
    lines += ["| size | tf / gradcli full | torch slow / gradcli full | torch fast / gradcli fast |", "|---|---:|---:|---:|"]
    pairs = (("tf.test.compute_gradient", "gradcli full"), ("torch gradcheck", "gradcli full"),
             ("torch gradcheck fast_mode", "gradcli fast"))
    for size in dict.fromkeys(k[0] for k in order):
        cells_of_size = []
        for peer, ours in pairs:
            ratios = {"seconds": [], "cpu_seconds": []}
            for document in documents:
                by = {r["checker"]: r for r in document["rows"] if r["size"] == size}
                for what in ratios:
                    if by.get(peer, {}).get(what) and by.get(ours, {}).get(what):
                        ratios[what].append(by[peer][what] / by[ours][what])
            wall, cpu = median(ratios["seconds"]), median(ratios["cpu_seconds"])
            cells_of_size.append("-" if wall is None else f"{wall:.2g}x ({fmt(cpu, '{:.2g}x')})")
        if any(cell != "-" for cell in cells_of_size):
            lines.append(f"| {size} | " + " | ".join(cells_of_size) + " |")
    lines.append("")
    return lines


def profile_section(documents) -> list[str]:
    if not documents:
        return ["No results yet: run `python bench/profile_differences.py`.", ""]
    parts = defaultdict(list)
    for document in documents:
        for row in document["rows"]:
            parts[row["part"]].append(row)
    lines = [
        runs_line(documents), "",
        f"Input W2 of the 43k model ({documents[-1]['elements']} elements), one chunk of "
        f"{documents[-1]['chunk_directions']} directions, one intra-op thread, CPU time:", "",
        "| part | CPU ms | CPU us per point |", "|---|---:|---:|",
    ]
    for part, rows in parts.items():
        lines.append(
            f"| {part} | {fmt(median(r['cpu_seconds'] for r in rows) * 1e3, '{:.1f}')} | "
            f"{fmt(median(r['cpu_us_per_point'] for r in rows), '{:.0f}')} |"
        )
    lines.append("")
    return lines


def simple_section(documents, columns, empty) -> list[str]:
    if not documents:
        return [empty, ""]
    cells, order = defaultdict(list), []
    for document in documents:
        for row in document["rows"]:
            key = tuple(row.get(c) for c in columns)
            if key not in cells:
                order.append(key)
            cells[key].append(row)
    header = list(columns) + ["wall s", "CPU s", "peak MiB", "note"]
    lines = [runs_line(documents), "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key in order:
        rows = cells[key]
        lines.append(
            "| " + " | ".join(str(k) for k in key) + " | "
            f"{fmt(median(r.get('wall') for r in rows))} | {fmt(median(r.get('cpu') for r in rows))} | "
            f"{fmt(median(r.get('peak_mib') for r in rows), '{:.0f}')} | {rows[-1].get('note', '')} |"
        )
    lines.append("")
    return lines


def api_warm_section(documents) -> list[str]:
    if not documents:
        return ["No results yet: run `python bench/api_warm.py`.", ""]
    rows = defaultdict(list)
    for document in documents:
        for row in document["rows"]:
            rows[(row.get("function", "sin(x) x"), row["checker"])].append(row)
    lines = [runs_line(documents), "",
             "| function | checker | wall ms | min ms | CPU ms | x torch (wall) | retracing warnings |",
             "|---|---|---|---|---|---|---|"]
    for (function, checker), found in rows.items():
        ms = lambda key: fmt(median(r.get(key) for r in found) * 1e3)  # noqa: E731
        torch = rows.get((function, "torch gradcheck"))
        ratio = fmt(median(r["wall"] for r in found) / median(r["wall"] for r in torch)) if torch else "-"
        warnings = [r.get("retracing_warnings") for r in found if r.get("retracing_warnings") is not None]
        lines.append(f"| {function} | {checker} | {ms('wall')} | {ms('min_wall')} | {ms('cpu')} | {ratio} | "
                     f"{max(warnings) if warnings else '-'} |")
    lines.append("")
    return lines


def process_ratio(documents) -> list[str]:
    rows = defaultdict(list)
    for document in documents:
        for row in document["rows"]:
            rows[row["command"]].append(row)
    ours, theirs = rows.get("gradcli check --mode full (43k)"), rows.get("compute_gradient script (43k)")
    lines = []
    if ours and theirs:
        wall = median(r["wall"] for r in theirs) / median(r["wall"] for r in ours)
        cpu = median(r["cpu"] for r in theirs) / median(r["cpu"] for r in ours)
        lines.append(f"Whole process at 43k: the compute_gradient script takes {wall:.2g}x the wall time "
                     f"({cpu:.2g}x the CPU time) of `gradcli check --mode full`.")
    base, check = rows.get("import tensorflow"), rows.get("gradcli check square.py")
    if base and check:
        lines.append(
            f"`gradcli check` on the smallest sample adds "
            f"{median(r['cpu'] for r in check) - median(r['cpu'] for r in base):.2f} CPU s to "
            f"`import tensorflow` ({median(r['cpu'] for r in base):.2f} CPU s)."
        )
    return lines + [""] if lines else []


#: Issue 36's targets: (model file or layer_speed target, what it must show).
TARGETS = [
    ("hub_bert_2layer.py", "every element checked in <= 15 s"),
    ("hub_gpt2_2layer.py", "every element checked in <= 15 s"),
    ("hub_llama_2layer.py", "every element checked in <= 15 s"),
    ("tfp_bessel_ive.py", "<= 5 s"),
    ("tfp_log_bessel_ive.py", "<= 5 s"),
    ("tfp_betaincinv.py", "<= 5 s"),
    ("tfp_hyp2f1.py", "<= 5 s"),
    ("resnet50", "exit 0 in <= 100 training steps"),
    ("resnet50_wrong", "exit 1 in <= 100 training steps, the wrong layer named"),
    ("hub_bert_base.py", "exit 0 in <= 300 training steps, within the memory limit"),
    ("hub_gpt2_small.py", "exit 0 in <= 300 training steps, within the memory limit"),
    ("hub_bert_base_wrong_gelu.py", "exit 1 in <= 300 training steps, transformer_layer_5 named"),
]


def latest_targets() -> dict:
    """Each target's latest run: name -> (UTC, seconds, training step ms,
    training steps, peak MB or None, what it found)."""
    found = {}
    for document in load_results("real_libraries_speed"):
        for row in document["rows"]:
            if not {"gradcli_seconds", "training_step_ms", "training_steps"} <= row.keys():
                continue  # an early run's format: later runs of its model stand for it
            layers = ", ".join(row.get("failing_layers") or []) or "none"
            verdict = ("pass" if row.get("ok") else "fail") + f" ({row.get('mode')}; failing layers: {layers})"
            found[row["model"]] = (document["machine"]["utc"], row["gradcli_seconds"], row["training_step_ms"],
                                   row["training_steps"], row.get("peak_mb"), verdict)
    for document in load_results("layer_speed"):
        for name, row in (document.get("targets") or {}).items():
            if not {"seconds", "training_step", "training_steps"} <= row.keys():
                continue
            layers = ", ".join(f"{layer['path']} ({layer['class']})" for layer in row.get("failed_layers") or [])
            verdict = f"exit {row['exit_code']} ({row.get('mode')}; failing layers: {layers or 'none'})"
            found[name] = (document["machine"]["utc"], row["seconds"], row["training_step"] * 1e3,
                           row["training_steps"], None, verdict)
    return found


def targets_section() -> list[str]:
    """Issue 36's targets, each its latest run, and the warm API call's ratios from
    the latest ``api_warm`` run: runs of different sittings sit side by side,
    so each says when it ran."""
    found = latest_targets()
    lines = [
        "Each target's latest run (its UTC time beside it: targets measured in different sittings",
        "met different loads). Training steps: the check's seconds over one float32 training step",
        "of the same model, timed in the same run.", "",
        "| target | run (UTC) | check s | training step ms | training steps | peak MB | found | target |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for name, target in TARGETS:
        if name not in found:
            lines.append(f"| {name} | - | - | - | - | - | not run | {target} |")
            continue
        when, seconds, step_ms, steps, peak, verdict = found[name]
        lines.append(f"| {name} | {when} | {seconds:.2f} | {step_ms:.1f} | {steps:.0f} | {fmt(peak, '{:.0f}')} | "
                     f"{verdict} | {target} |")
    warm = load_results("api_warm")
    if warm:
        rows = {(r.get("function", "sin(x) x"), r["checker"]): r for r in warm[-1]["rows"]}
        for function, target in (("own tanh(x) x", "<= 10x"), ("sin(x) x", "<= 10x")):
            ours, torch = rows.get((function, "gradcli check")), rows.get((function, "torch gradcheck"))
            if ours and torch:
                lines.append(
                    f"| warm API call, {function} | {warm[-1]['machine']['utc']} | {ours['wall'] * 1e3:.2f} ms | - | - "
                    f"| - | {ours['wall'] / torch['wall']:.1f}x torch gradcheck ({torch['wall'] * 1e3:.2f} ms) | {target} |")
    lines.append("")
    return lines


def main():
    check = latest_sitting(load_results("check_speed"))
    startup = latest_sitting(load_results("startup_speed"))
    second = latest_sitting(load_results("second_order_speed"))
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python bench/report.py` from the JSON files in `bench/results/`;",
        "do not edit by hand. How each bench works, and where the time goes, is in",
        "`bench/README.md`. The machine has 2 cores shared with other work, so every",
        "figure is a median over the runs of its bench's latest sitting (its newest run and those",
        f"before it back to the first gap over {SITTING_GAP.seconds // 3600} hour between two runs: older runs measured",
        "older code), with the load beside it; CPU seconds (all threads of the process) move less",
        "with the load than wall seconds.",
        "",
        "## Issue 36's targets (`bench/real_libraries_speed.py`, `bench/layer_speed.py`, `bench/api_warm.py`)",
        "",
        *targets_section(),
        "## Gradient checkers side by side (`bench/check_speed.py`)",
        "",
        "One process, the same MLP loss (16-n-4, tanh, batch 8, float64) for every",
        "checker, time after imports. Max error: the checker's numeric derivative",
        "against the exact float64 gradient (n/a: the checker returns only a verdict;",
        "gradcli fast: of its projections). The function is correct, so the right",
        "verdict is pass. `gradcli auto` runs on the 6k model and says which mode it picked.",
        "",
        *[line for threads, documents in by_threads(check) for line in (
            f"### {THREADS.get(threads, f'{threads} intra-op threads')}", "",
            *check_speed_section(documents),
        )],
        f"Targets at 43k: full >= {TARGET_VS_TF:g}x faster than tf.test.compute_gradient and",
        f">= {TARGET_VS_TORCH:g}x faster than torch gradcheck; fast faster than torch's fast mode.",
        "",
        "## Whole process (`bench/startup_speed.py`)",
        "",
        *simple_section(startup, ("command",), "No results yet: run `python bench/startup_speed.py`."),
        *process_ratio(startup),
        f"Target: `gradcli check --mode full` on the 43k model file >= {TARGET_PROCESS:g}x faster",
        "than the compute_gradient script on the same file.",
        "",
        "## Fast checks in a fresh process (`bench/fast_cold.py`)",
        "",
        "Each fast checker as a CI job meets it: its own new process, imports done and not",
        "timed, then the first check (cold) and a second one (warm) on the 43k model.",
        "",
        *simple_section(latest_sitting(load_results("fast_cold")), ("checker", "call"),
                        "No results yet: run `python bench/fast_cold.py`."),
        "## A warm call of the Python API (`bench/api_warm.py`)",
        "",
        "`gradcli.check(f, (x,))` of f(x) = sin(x) * x on 6 float64 elements, called in a loop",
        "in one process beside torch `gradcheck` and jax `check_grads` (when installed):",
        "milliseconds per call after the warm-up: medians across runs of each run's median,",
        "minimum and CPU time (all threads), and TensorFlow's retracing warnings in gradcli's calls.",
        "",
        *api_warm_section(latest_sitting(load_results("api_warm"))),
        "## One chunk of differences, in parts (`bench/profile_differences.py`)",
        "",
        *profile_section(latest_sitting(load_results("profile_differences"))),
        "## Second order and Hessians (`bench/second_order_speed.py`)",
        "",
        "Each command in its own process with a user's defaults; peak resident memory of",
        "the process (TensorFlow itself takes about 400-800 MiB).",
        "",
        *simple_section(second, ("size", "params", "command"),
                        "No results yet: run `python bench/second_order_speed.py`."),
    ]
    os.makedirs(os.path.dirname(PAGE), exist_ok=True)
    with open(PAGE, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    print("wrote", PAGE)


if __name__ == "__main__":
    main()
