"""JSON documents for ``--json``. The schema is documented in the README."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from gradcli.results import CheckResult

SCHEMA_VERSION = 1


def check_document(result: CheckResult) -> dict:
    models = []
    for model in result.models:
        entry = _plain(model)
        entry["ok"] = model.ok
        models.append(entry)
    return {"schema": SCHEMA_VERSION, "ok": result.ok, "exit_code": result.exit_code, "models": models}


def logdet_document(result) -> dict:
    entry = _plain(result)
    entry["ok"] = result.ok
    return {"schema": SCHEMA_VERSION, "ok": result.ok, "exit_code": result.exit_code, "model": entry}


def _plain(obj):
    """Dataclasses, numpy scalars and arrays -> JSON-ready Python values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.generic):
        return _plain(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)  # JSON has no NaN/Infinity
    return obj


def dumps(document: dict) -> str:
    return json.dumps(_plain(document), indent=2)
