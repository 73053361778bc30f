"""bench/report.py, which renders docs/benchmarks.md: each bench's figures come
from its latest sitting only (older runs measured older code)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _report():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(when: str) -> dict:
    return {"machine": {"utc": when}, "rows": []}


def test_the_latest_sitting_is_the_newest_run_back_to_the_first_gap_over_an_hour():
    report = _report()
    runs = [_run("2026-11-30T13:44:24Z"), _run("2026-11-30T21:08:02Z"), _run("2026-11-30T22:39:34Z"),
            _run("2026-12-01T00:10:00Z"), _run("2026-12-01T00:43:56Z"), _run("2026-12-01T00:55:00Z")]
    # Saved out of order (results are read by file name): the sitting is by time.
    shuffled = [runs[4], runs[0], runs[5], runs[2], runs[3], runs[1]]
    assert report.latest_sitting(shuffled) == runs[3:]
    assert report.latest_sitting(runs[:3]) == runs[2:3]  # 91 minutes after the one before it
    assert report.latest_sitting(runs[:1]) == runs[:1]
    assert report.latest_sitting([]) == []
