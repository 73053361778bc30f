"""A warm check must report what a cold one does: every model of the given
folders that is a plain callable with a dict of inputs, checked four times in
one process through the Python API (``gradcli.check(model, inputs)``): the
first cold, the second tracing its program, the third and fourth warm
(``gradcli.analyses.check.warm``). Prints, per model, how many checks ran a
kept program and whether the four reports are the same (numbers to 8 digits,
timings left out), and the count of models whose reports differ.

    python bench/warm_reports.py bench/real_bugs tests/models
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

CHECKS = 4


def plain(node):
    """A report's JSON without timings (a mode choice's predicted seconds
    included), its numbers to 8 digits."""
    if isinstance(node, str):
        return re.sub(r"predicted [0-9.]+ s", "predicted (seconds)", node)
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items() if "seconds" not in k and k != "elapsed"}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, float) and np.isfinite(node):
        return 0.0 if abs(node) < 1e-12 else float(f"{node:.8g}")
    return node


def module_of(path: str):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # its helper modules
    spec = importlib.util.spec_from_file_location("warm_" + os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    import gradcli
    from gradcli.numerics import autodiff
    from gradcli.render import json as json_render

    runs = []
    original = autodiff.Program.jacobians

    def counted(self, point):
        runs.append(1)
        return original(self, point)

    autodiff.Program.jacobians = counted
    differ = checked = 0
    for path in sorted(p for folder in args.folders for p in glob.glob(os.path.join(folder, "[!_]*.py"))):
        with open(path) as source:
            if "os._exit" in source.read():  # ends any process that runs it (the isolation fixtures)
                print(f"{path:50s} skipped (os._exit)")
                continue
        try:
            module = module_of(path)
        except BaseException as exc:  # noqa: BLE001 - a fixture that fails on import is no case here
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"{path:50s} not imported ({type(exc).__name__})")
            continue
        if not callable(getattr(module, "model", None)) or not isinstance(getattr(module, "inputs", None), dict):
            continue
        runs.clear()
        try:
            reports = [plain(json_render.document("check", gradcli.check(module.model, module.inputs)))
                       for _ in range(CHECKS)]
        except BaseException as exc:  # noqa: BLE001 - a usage error raises the same each time
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"{path:50s} raises {type(exc).__name__}")
            continue
        same = all(r == reports[0] for r in reports)
        checked += 1
        differ += not same
        print(f"{path:50s} warm checks {len(runs)} of {CHECKS}  {'same' if same else 'DIFFER'}  "
              f"{'pass' if reports[0]['ok'] else 'fail'}")
    print(f"{checked} models, {differ} whose warm reports differ from the cold one")


if __name__ == "__main__":
    main()
