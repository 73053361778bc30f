"""Where bench scripts keep their results: one JSON file per run under
bench/results/, named by script and UTC time, read back by bench/report.py."""

from __future__ import annotations

import json
import os
import platform
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def machine() -> dict:
    """What a reader needs to weigh the figures: cores, load, versions, when."""
    import numpy

    info = {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    for name in ("tensorflow", "torch", "jax"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    return info


def write_results(script: str, document: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    document = {"script": script, **document}
    document.setdefault("machine", machine())
    document["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = os.path.join(RESULTS, f"{script}-{stamp}.json")
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
    return path


def load_results(script: str) -> list[dict]:
    """Every saved run of ``script``, oldest first."""
    if not os.path.isdir(RESULTS):
        return []
    names = sorted(n for n in os.listdir(RESULTS) if n.startswith(script + "-") and n.endswith(".json"))
    documents = []
    for name in names:
        with open(os.path.join(RESULTS, name)) as f:
            documents.append(json.load(f))
    return documents
