"""Record every model file's verdicts, and compare two records.

A restructuring must leave behaviour unchanged: run this before and after, on
the same folders, and compare. Each model file is checked with gradcli's
defaults (its own `check` dict and the project configuration ignored only by
``--isolated``), in one batch; what is recorded is what a user reads first:
the exit status of the model, its error line, and for every input/output pair
its verdict, whether it failed, and its culprit's op.

    python bench/verdict_table.py record tests/models sample_models bench/real_bugs --out before.json
    python bench/verdict_table.py compare before.json after.json

Auto mode chooses full or fast by timing; ``--budget 600`` (the default here)
makes it choose full for every model these folders hold, so a difference is
not a timing accident.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def record(paths: list[str], budget: float, timeout: float) -> dict:
    command = [sys.executable, "-m", "gradcli", "check", *paths, "--json", "--isolated",
               "--budget", str(budget), "--timeout", str(timeout)]
    done = subprocess.run(command, capture_output=True, text=True)
    document = json.loads(done.stdout)
    table = {}
    for model in document["result"]["models"]:
        key = model["path"] + (f":{model['name']}" if model.get("name") and ":" in str(model.get("name")) else "")
        table[key] = {
            "ok": model["ok"],
            "error": (model.get("error") or "")[:200],
            "pairs": {
                f"{p['input']} -> {p['output']}": {
                    "verdict": p["verdict"], "failed": p["failed"],
                    "culprit": _culprit(p.get("culprit")),
                }
                for p in model.get("pairs") or []
            },
        }
    return table


def _culprit(culprit) -> str | None:
    if not culprit:
        return None
    site = culprit.get("site") or {}
    return f"{site.get('description') or site.get('op_type')} at {site.get('location')}"


def compare(before: dict, after: dict) -> int:
    rows, differ = [], 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        differ += 1
        rows.append(f"| {key} | {_brief(a)} | {_brief(b)} |")
    print(f"{len(set(before) | set(after))} model files, {differ} differ")
    if rows:
        print("| model | before | after |\n|---|---|---|")
        print("\n".join(rows))
    return 1 if differ else 0


def summary(table: dict) -> str:
    passed = sum(m["ok"] for m in table.values())
    errors = sum(bool(m["error"]) for m in table.values())
    pairs = [p for m in table.values() for p in m["pairs"].values()]
    verdicts: dict[str, int] = {}
    for p in pairs:
        verdicts[p["verdict"]] = verdicts.get(p["verdict"], 0) + 1
    words = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items(), key=lambda kv: -kv[1]))
    return f"{len(table)} model files: {passed} pass, {len(table) - passed - errors} fail, {errors} could not be checked; {len(pairs)} pairs: {words}"


def _brief(model: dict | None) -> str:
    if model is None:
        return "absent"
    if model["error"]:
        return "error: " + model["error"][:80]
    return "; ".join(f"{k}: {v['verdict']}{' (' + str(v['culprit']) + ')' if v['culprit'] else ''}" for k, v in model["pairs"].items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("paths", nargs="+")
    rec.add_argument("--out", required=True)
    rec.add_argument("--budget", type=float, default=600.0)
    rec.add_argument("--timeout", type=float, default=300.0)
    cmp = sub.add_parser("compare")
    cmp.add_argument("before")
    cmp.add_argument("after")
    args = parser.parse_args()
    if args.what == "record":
        table = record(args.paths, args.budget, args.timeout)
        with open(args.out, "w") as out:
            json.dump(table, out, indent=1, sort_keys=True)
        print(summary(table))
        return 0
    with open(args.before) as a, open(args.after) as b:
        before, after = json.load(a), json.load(b)
    print("before:", summary(before))
    print("after: ", summary(after))
    return compare(before, after)


if __name__ == "__main__":
    sys.exit(main())
