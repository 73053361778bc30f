"""Parse VALUE arguments and fit them to the shapes they stand for.

A VALUE is a JSON literal (``2.5``, ``[[1, 2], [3, 4]]``) or a file:
``@path.npy``, ``@path.npz:key`` (``@path.npz`` alone when it holds one
array). Everything here is numpy only, so option errors are reported before
TensorFlow is imported.
"""

from __future__ import annotations

import json
import os

import numpy as np

from gradcli.errors import error_line
from gradcli.errors import UsageError


def parse_value(text: str, what: str = "VALUE") -> np.ndarray:
    """Return the array a VALUE stands for; ``what`` names it in errors."""
    if text.startswith("@"):
        # complex values pass here: a complex input takes them (loading splits
        # them into its two leaves); ``fit_value`` refuses them for a real one
        return require_numeric(_load_file_value(text[1:], what), what, UsageError, complex_ok=True)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise UsageError(
            f"{what}: {text!r} is not a number, a JSON array or @FILE.npy / @FILE.npz:KEY"
        ) from None
    try:
        array = np.asarray(data)
    except ValueError:  # ragged nesting
        raise UsageError(f"{what}: {text!r} is a ragged array") from None
    if array.dtype != bool and _has_boolean(data):
        # np.asarray([1.5, true]) would quietly read true as 1.0
        raise UsageError(f"{what}: {text!r} mixes booleans and numbers")
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or array.dtype == bool
    ):
        raise UsageError(f"{what}: {text!r} is not numeric")
    return array


def _has_boolean(data) -> bool:
    if isinstance(data, list):
        return any(_has_boolean(item) for item in data)
    return isinstance(data, bool)


def require_numeric(array: np.ndarray, what: str, error=UsageError, complex_ok: bool = False) -> np.ndarray:
    """``array`` if its dtype is a real number or boolean dtype; else ``error``
    (``UsageError`` for values given to gradcli, ``ModelError`` for a model
    file's ``inputs``) in one line saying what it is instead.

    Complex values are refused (unless ``complex_ok``: a value that may be
    meant for a complex input) rather than cast: casting drops the imaginary
    part silently. A complex input is two real leaves (``structure``), and a
    complex value given for it is split into them by loading.
    """
    kind = array.dtype.kind
    if kind in "biuf" or (complex_ok and kind == "c"):
        return array
    if kind == "c":
        problem = (
            f"is complex ({array.dtype}) where a real value is expected; a complex input "
            "takes complex values, and its parts are set as NAME.real and NAME.imag"
        )
    elif kind in "mM":
        problem = f"is a {array.dtype} array (dates or durations), not numbers"
    elif kind in "USa" or (
        kind == "O" and array.size and all(isinstance(v, (str, bytes)) for v in array.flat)
    ):  # an object array of bytes is what a tf.string tensor's .numpy() gives
        problem = f"is a string array ({'string' if kind == 'O' else array.dtype}), not numbers"
    else:
        problem = f"is not numeric ({array.dtype})"
    raise error(f"{what} {problem}")


def _load_file_value(spec: str, what: str) -> np.ndarray:
    path, key = spec, None
    if not os.path.exists(path) and ":" in spec:
        path, key = spec.rsplit(":", 1)
    if not os.path.exists(path):
        raise UsageError(f"{what}: no such file {path!r}")
    try:
        loaded = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises several types for unreadable files
        raise UsageError(f"{what}: cannot read {path!r} as .npy/.npz ({_first_line(exc)})") from None
    if isinstance(loaded, np.ndarray):
        if key is not None:
            raise UsageError(f"{what}: {path!r} is a .npy file; it has no key {key!r}")
        return loaded
    with loaded:
        keys = list(loaded.files)
        if key is None:
            if len(keys) != 1:
                raise UsageError(
                    f"{what}: {path!r} holds {len(keys)} arrays; name one as "
                    f"@{path}:KEY (keys: {', '.join(keys)})"
                )
            key = keys[0]
        if key not in keys:
            raise UsageError(
                f"{what}: {path!r} has no key {key!r} (keys: {', '.join(keys)})"
            )
        try:  # members are read lazily: an object array or a damaged member fails here
            return loaded[key]
        except Exception as exc:
            raise UsageError(f"{what}: cannot read {key!r} of {path!r} ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    return error_line(exc) or type(exc).__name__


def parse_assignment(text: str, option: str) -> tuple[str, np.ndarray]:
    """Parse ``NAME=VALUE`` as given to the command-line option ``option`` names."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise UsageError(f"{option} takes NAME=VALUE, got {text!r}")
    return name, parse_value(value, what=f"{option} {name}")


def parse_assignments(texts, option: str) -> dict[str, np.ndarray]:
    result: dict[str, np.ndarray] = {}
    for text in texts:
        name, value = parse_assignment(text, option)
        if name in result:
            raise UsageError(f"{option} gives {name!r} twice")
        result[name] = value
    return result


def parse_names(texts) -> list[str] | None:
    """Names given as repeated options and/or comma-separated lists."""
    if not texts:
        return None
    names = [n.strip() for text in texts for n in text.split(",") if n.strip()]
    return names or None


def fit_to_shape(value: np.ndarray, shape: tuple, what: str) -> np.ndarray:
    """Broadcast a scalar to ``shape``; any other shape must match exactly."""
    value = np.asarray(value)
    if value.shape == tuple(shape):
        return value
    if value.ndim == 0:
        return np.broadcast_to(value, shape).copy()
    raise UsageError(
        f"{what} has shape {list(value.shape)}, expected {list(shape)} (or a scalar)"
    )


def fit_value(value: np.ndarray, like: np.ndarray, what: str) -> np.ndarray:
    """``value`` with the shape (``fit_to_shape``) and dtype of ``like``, the
    input or output it stands for, converted only where no information is lost:

    * a floating target takes integers and floats, never booleans (``true`` is
      not the number 1.0), rounded to its precision but never overflowing to inf;
    * an integer target takes integers, and floats only when they are whole
      numbers (``n=1.5`` on an integer input would otherwise become a silently
      differentiated float), within the target dtype's range;
    * a boolean target takes booleans only.
    """
    value = fit_to_shape(require_numeric(np.asarray(value), what), np.shape(like), what)
    target = np.asarray(like).dtype
    given = value.dtype
    expected = f"({target} expected)"
    if target.kind == "f" and given.kind == "b":
        raise UsageError(f"{what}: booleans are not numbers {expected}")
    if target.kind == "f":
        wide = value.astype(np.float64)
        # NaN and inf pass through: a non-finite point is the model check's to
        # refuse (exit 3, naming the element; core.require_finite)
        huge = wide[np.isfinite(wide) & (np.abs(wide) > np.finfo(target).max)]
        if huge.size:
            raise UsageError(f"{what}: {huge.flat[0]:g} overflows {target} {expected}")
    if target.kind in "iu":
        if given.kind == "b":
            raise UsageError(f"{what}: booleans are not integers {expected}")
        whole = np.mod(value, 1) == 0 if given.kind == "f" else np.ones(value.shape, bool)
        fractional = value[~whole]
        if fractional.size:
            raise UsageError(f"{what}: {fractional.flat[0]:g} is not a whole number {expected}")
        info = np.iinfo(target)
        with np.errstate(over="ignore", invalid="ignore"):  # comparing across dtypes
            outside = value[(value < info.min) | (value > info.max)]
        if outside.size:
            raise UsageError(
                f"{what}: {outside.flat[0]:g} is outside [{info.min}, {info.max}] {expected}"
            )
    if target.kind == "b" and given.kind != "b":
        raise UsageError(f"{what}: give true or false {expected}")
    return value.astype(target)


def check_unknown(names, known, what: str) -> None:
    """Raise a UsageError naming the first of ``names`` not in ``known``."""
    for name in names:
        if name not in known:
            raise UsageError(
                f"unknown {what} {name!r} (known: {', '.join(sorted(known)) or 'none'})"
            )
