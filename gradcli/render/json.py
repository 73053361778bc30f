"""``--json``: one versioned envelope for every command.

Every command prints exactly one document on stdout::

    {"schema": 2, "command": "check", "ok": true, "exit_code": 0,
     "error": null, "result": {...}}

``result`` is the command's result object as plain JSON (dataclass fields by
name; arrays as nested lists; NaN and infinities as the strings "nan", "inf",
"-inf", which JSON cannot hold). When the command could not run (exit 2 or 3
after its options were read), ``error`` holds the message and ``result`` is
null. An interrupted run (Ctrl-C, SIGTERM) has both: ``error`` says so
("interrupted") and ``result`` holds the models that finished (those not
finished are in ``skipped``), with ``ok`` false and the exit code 130 or 143.
The schema is documented in docs/reference/json.md and pinned by tests.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np


#: 2: one envelope for every command (1 had a shape per command).
SCHEMA_VERSION = 2
#: hessian: the matrix and its labels are included up to this many parameters.
MATRIX_LIMIT = 100


def document(command: str, result=None, error=None) -> dict:
    """The envelope for ``result``, or for ``error`` (a ``GradcliError`` or a
    click usage error: anything with ``exit_code`` and a message), or for the
    part of ``result`` an interrupted run finished (both)."""
    body = {
        "schema": SCHEMA_VERSION, "command": command, "ok": False, "exit_code": None,
        "error": None, "result": None,
    }
    if result is not None:
        payload = PAYLOADS.get(command, _plain)(result)
        body.update(ok=result.ok, exit_code=result.exit_code, result=_plain(payload))
    if error is not None:
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        body.update(ok=False, exit_code=error.exit_code, error=message)
    return body


def _check(result) -> dict:
    """Each model's fields plus its own ``ok``."""
    return {
        "models": [{**_plain(m), "ok": m.ok} for m in result.models],
        "skipped": result.skipped,
    }


def _hessian(result, include_matrix_limit: int = MATRIX_LIMIT) -> dict:
    """Flattened: the spectrum's fields at the top; the matrix only when small."""
    spectrum = result.spectrum
    sampling = None
    if result.sampling is not None:
        s = result.sampling
        sampling = {
            "samples": s.samples, "radius": s.radius, "rng_seed": s.rng_seed, "rule": s.rule,
            "n_negative": s.n_negative, "n_positive": s.n_positive, "n_nonfinite": s.n_nonfinite,
            "witness_for": s.witness_for,
            "witness": None if s.worst is None else {
                "values": s.worst.values, "smallest": s.worst.smallest,
                "largest": s.worst.largest, "verdict": s.worst.verdict,
                "set": set_arguments(s.worst.values),
            },
            "smallest": s.smallest, "largest": s.largest,
        }
    fd = None
    if result.fd_check is not None:
        fd = {
            "ok": not result.fd_check.failed, **_plain(result.fd_check),
        }
    return {
        "name": result.name,
        "path": result.path,
        "dtype": result.dtype,
        "function": result.function,
        "n": result.n,
        "blocks": result.blocks,
        "method": spectrum.method,
        "value": result.value,
        "gradient_norm": result.gradient_norm,
        "eigenvalues": spectrum.eigenvalues,
        "residuals": spectrum.residuals,
        "smallest": spectrum.smallest,
        "largest": spectrum.largest,
        "verdict": spectrum.verdict,
        "zero_tolerance": {"value": spectrum.zero_tol, "rule": spectrum.zero_rule},
        "condition_number": spectrum.condition,
        "symmetry_error": result.symmetry_error,
        "hessian": result.hessian if result.hessian is not None and result.n <= include_matrix_limit else None,
        "labels": result.labels if result.n <= include_matrix_limit else [],
        "trace": result.trace,
        "hvps": spectrum.hvps,
        "converged": spectrum.converged,
        "fd_check": fd,
        "sampling": sampling,
        "expect": result.expect,
        "expectation_met": result.expectation_met,
        "expectation_reason": result.expectation_reason,
        "notes": result.notes,
        "seconds": result.seconds,
    }


PAYLOADS = {"check": _check, "hessian": _hessian}


def _plain(obj):
    """Dataclasses, numpy scalars and arrays -> JSON-ready Python values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.metadata.get("internal")}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.generic):
        return _plain(obj.item())
    if isinstance(obj, complex):
        return {"real": _plain(obj.real), "imag": _plain(obj.imag)}
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)  # JSON has no NaN/Infinity
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "backslashreplace")
    return obj


def dumps(document: dict) -> str:
    return json.dumps(_plain(document), indent=2)


def set_arguments(values: dict) -> list[str]:
    """Command-line arguments setting each input (``overrides``) that reproduce ``values`` exactly: the
    inverse of ``parse_assignment`` (JSON numbers print the shortest decimal
    that round-trips a float64)."""
    return [f"--set {name}={json.dumps(np.asarray(v).tolist())}" for name, v in values.items()]
