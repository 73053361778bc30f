"""The memory rule: predict a dense block's memory before allocating it.

A dense Jacobian of a 20,000-element model by a 20,000-element input is 3.2 GB
in float64, and building it costs several copies (TensorFlow's output tensor,
numpy's copy, a working array): measured, 12.7 GB peak for that 3.2 GB block.
A Hessian by columns, a check's per-pair blocks and a numeric Jacobian
(finite differences along every axis) grow the same way. Rather than swap,
fail with MemoryError or be killed after minutes, every analysis that builds
such a block calls ``require_memory`` first, with the predicted size
(``dense_bytes``) and the cheaper route; beyond the limit it stops at once
with a usage error (exit 2) naming both. A block that only adds detail to a
result already found (the element-wise re-check of a pair that failed the fast
check) asks ``over_limit`` instead and is skipped, with a note, when it would
not fit: the fast result is reported.

The limit is ``max_memory`` bytes when given (``--max-memory 2GB``), else
``SAFE_FRACTION`` of the memory available now (``MemAvailable`` of
/proc/meminfo: what can be allocated without swapping). With neither (no
/proc, an unusual platform) nothing is refused.
"""

from __future__ import annotations

import re

from gradcli.errors import UsageError

#: Default limit: half the available memory. The prediction counts the dense
#: blocks and their copies, not TensorFlow's own working memory or the model's
#: activations, so half leaves room for those and for other processes.
SAFE_FRACTION = 0.5
#: Copies of a dense block alive at the peak of building it: TensorFlow's
#: result, numpy's copy and one working array (abs values, errors, the
#: transposed Hessian), plus one for the stacked evaluations. Calibrated on the
#: 20,000 x 20,000 Jacobian above: 12.7 GB peak / 3.2 GB block = 4.0.
COPIES = 4
#: Dense n x n blocks a full check of second derivatives holds (``check
#: --order 2`` in full, the dense Hessian's finite-difference check): the
#: analytic Hessian(s), the numeric one with its error estimates, and the
#: comparison's working arrays. Calibrated on bench/second_order_speed.py at
#: n = 10,160 in float64: 9.8 GB (check --order 2) and 10.1 GB (hessian
#: --method dense) peak, 12 n**2 entries = 3 blocks x COPIES. (Counting two
#: blocks, as before that run, predicted 6.6 and 3.3 GB.)
SECOND_ORDER_BLOCKS = 3

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """``"2GB"`` -> 2_000_000_000 bytes; units B, KB, MB, GB, TB (powers of
    1000) and KiB, MiB, GiB, TiB (powers of 1024); a bare number is bytes."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size such as 512MB, 2GB or 1.5GiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return size


def format_size(size: float) -> str:
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= factor:
            return f"{size / factor:.3g} {unit}"
    return f"{int(size)} B"


def available_memory() -> int | None:
    """Bytes that can be allocated without swapping (Linux ``MemAvailable``)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_limit(max_memory: int | None) -> tuple[int | None, str]:
    """The limit in bytes (None: no limit known) and how it was chosen."""
    if max_memory is not None:
        return max_memory, "the limit set"
    available = available_memory()
    if available is None:
        return None, ""
    return int(available * SAFE_FRACTION), f"{SAFE_FRACTION:.0%} of the {format_size(available)} available"


def dense_bytes(elements: int, itemsize: int = 8, copies: int = COPIES) -> int:
    """Predicted peak bytes of building a dense array of ``elements`` entries."""
    return int(elements) * int(itemsize) * copies


def over_limit(predicted: int, max_memory: int | None) -> str | None:
    """None when ``predicted`` bytes fit the limit; else how far over it is,
    for a note ("about 80 GB, over the 11.3 GB limit (50% of ...)"). For a
    block that is optional (a full re-check after a failing fast check): the
    caller skips it instead of stopping the run."""
    limit, how = memory_limit(max_memory)
    if limit is None or predicted <= limit:
        return None
    return f"about {format_size(predicted)}, over the {format_size(limit)} limit ({how})"


def require_memory(predicted: int, what: str, cheaper: str, max_memory: int | None) -> None:
    """Raise ``UsageError`` (exit 2) before allocating ``predicted`` bytes beyond the limit.

    ``what``: the block, with its shape ("the dense Jacobian (20000 x 20000
    float64)"); ``cheaper``: the route that needs no such block.
    """
    if max_memory is not None and (isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory <= 0):
        raise UsageError(f"must be a positive number of bytes, got {max_memory!r}", param="max_memory")
    limit, how = memory_limit(max_memory)
    if limit is None or predicted <= limit:
        return
    raise UsageError(
        f"is {format_size(limit)} ({how}); {what} would need about {format_size(predicted)}. "
        f"{cheaper}, or raise {{@max_memory}}",
        param="max_memory", bad_value=False,
    )
