"""The point a model is checked at, and what is differentiated there.

``apply_overrides`` sets input values given with the ``overrides`` option
(a nested input only through its leaves; a complex value as its real and
imaginary leaves); ``choose_wrt`` picks the inputs to differentiate: exactly
the names the ``wrt`` option or the model file's ``wrt`` lists, else every
floating input and trainable weight. The point must be finite
(``check_finite_inputs``): a gradient at a NaN is no gradient to check.
"""

from __future__ import annotations

import numpy as np

from gradcli.errors import ModelError, UsageError
from gradcli.model.core import Model, is_floating, name_list, require_finite, shared_name
from gradcli.model.paths import relative_path
from gradcli.model.values import check_unknown, fit_value


def apply_overrides(model: Model, overrides: dict[str, np.ndarray]) -> None:
    """Set the inputs ``overrides`` names, each fitted to its input's shape and
    dtype (``values.fit_value``); a nested input is set through its leaves."""
    overrides = _complex_overrides(model, overrides)
    for name in overrides:
        leaves = _leaves_under(model, name)
        if leaves:
            raise UsageError(
                f"{{@set}} {name}: a nested input; set its leaves ({name_list(leaves)})"
            )
    check_unknown(overrides, model.point, "input for {@set}")
    for name, value in overrides.items():
        model.point[name] = fit_value(value, model.point[name], f"{{@set}} {name}")


def choose_wrt(model: Model, given_wrt, file_wrt) -> list[str]:
    """What to differentiate: exactly the names ``wrt`` lists (``given_wrt``, the
    ``wrt`` option, else the model file's ``wrt``); by default every floating input and every
    trainable weight, the targets of a loss aside (``Model.targets``). The
    gradient with respect to a Keras model's data is what backpropagation
    carries through it to the layers before it, so it is checked like its
    weights'. A SavedModel's default stays its weights. A note says what the
    default chose when the model has weights."""
    if given_wrt:
        names, source, error = list(given_wrt), "{@wrt}", UsageError
    elif file_wrt:
        names, source, error = list(file_wrt), f"{relative_path(model.path)}: `wrt`", ModelError
    if given_wrt or file_wrt:  # a nested input (``params``) stands for its leaves
        names = list(dict.fromkeys(leaf for n in names for leaf in (_leaves_under(model, n) or [n])))
        _refuse_unvaried(model, [n for n in names if n in model.unvaried], "or leave them out of `wrt`")
        if model.unvaried:
            model.notes.append(
                f"{name_list(model.unvaried)}: weights the model reads in a way gradcli cannot vary "
                "(e.g. inside a tf.function defined elsewhere), not in `wrt`: left as they are"
            )
    else:
        _refuse_unvaried(model, model.unvaried, "or list in `wrt` the inputs to check")
        names = [n for n, v in model.point.items() if is_floating(v) and n not in model.targets]
        if model.kind == "savedmodel":
            names = list(model.weights)
        if not names:
            described = ", ".join(f"{n} ({v.dtype})" for n, v in model.point.items())
            raise ModelError(
                f"{model.name}: nothing floating to differentiate (inputs: {described or 'none'})"
            )
        empty = [n for n in names if np.size(model.point[n]) == 0]
        names = [n for n in names if n not in empty]
        if not names:
            shapes = ", ".join(f"{n} shape {list(np.shape(model.point[n]))}" for n in empty)
            raise ModelError(
                f"{model.name}: nothing to differentiate: every floating input has no elements ({shapes})"
            )
        if empty:
            model.notes.append(f"{', '.join(empty)}: no elements (shape [0]), not differentiated")
        if model.weights and model.kind != "savedmodel":
            model.notes.append(_default_wrt_note(model, names))
        return names
    for name in names:
        shared = shared_name(name, model.point)
        if shared:
            raise error(
                f"{source}: {name!r} is the name of {len(shared)} distinct weights, numbered "
                f"{name_list(shared)}: name the ones to differentiate"
            )
        if name not in model.point:
            raise error(
                f"{source}: unknown input {name!r} (known: {', '.join(model.point)})"
            )
        if not is_floating(model.point[name]):
            raise error(
                f"{source}: input {name!r} is {model.point[name].dtype}; only "
                "floating-point inputs can be differentiated"
            )
        if np.size(model.point[name]) == 0:
            raise error(
                f"{source}: input {name!r} has no elements (shape "
                f"{list(np.shape(model.point[name]))}): nothing to differentiate"
            )
    return names


def _refuse_unvaried(model: Model, names: list[str], instead: str) -> None:
    """The weights ``names`` the model reads in a way gradcli cannot vary
    (``Model.unvaried``) cannot be differentiated: a gradient through the
    substituted inputs would show zero where the model's is not. ``instead``:
    what else the user can do."""
    if names:
        raise ModelError(
            f"{relative_path(model.path)}: the model reads {name_list(names)} in a way gradcli cannot "
            f"vary (e.g. inside a tf.function defined elsewhere); pass the weights as inputs instead, {instead}"
        )


def _complex_overrides(model: Model, overrides: dict) -> dict:
    """A complex value set on a complex input (the ``overrides`` option, ``z=@z.npy``) is its two
    leaves' values, ``z.real`` and ``z.imag`` (``structure``); a real value
    there sets the real part with the imaginary part zero."""
    complex_inputs = getattr(model.structure, "complex", None) or {}
    split = {}
    for name, value in overrides.items():
        if name in complex_inputs:
            real, imag = complex_inputs[name]
            value = np.asarray(value)
            split[real], split[imag] = np.real(value), np.imag(value)
        else:
            split[name] = value
    return split


def _leaves_under(model: Model, name: str) -> list[str]:
    """The leaves of the nested input ``name`` (``params`` -> ``params.w``,
    ``params.b``); [] when it is not one."""
    if model.structure is None or name in model.point:
        return []
    return model.structure.leaves_under(name)


def _default_wrt_note(model: Model, names: list[str]) -> str:
    """``differentiated with respect to input x and 4 weights (...)``: what the default
    chose, and what it left out."""
    data = [n for n in names if n not in model.weights]
    weights = [n for n in names if n in model.weights]
    parts = [f"{'input' if len(data) == 1 else 'inputs'} {name_list(data)}"] if data else []
    if weights:
        parts.append(f"{len(weights)} {'weight' if len(weights) == 1 else 'weights'}")
    left = [f"the targets {', '.join(model.targets)}"] if model.targets else []
    return (
        f"differentiated with respect to {' and '.join(parts)} (every floating input and trainable weight"
        f"{', not ' + ', '.join(left) if left else ''}; `wrt` narrows)"
    )


def check_finite_inputs(model: Model) -> None:
    require_finite(model.name, "input", model.point, "; gradients need a finite point")
