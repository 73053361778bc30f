"""gradcli: check and inspect gradients of TensorFlow models.

Every command of the command line is a function here, taking what the command
takes and returning the result object the command renders (``gradcli.results``):

    >>> import gradcli
    >>> result = gradcli.check("sample_models/square.py", rtol=1e-8)
    >>> result.ok, result.exit_code
    (True, 0)
    >>> gradcli.vjp(lambda x: x * x, inputs={"x": [1.0, 2.0]}).arrays()["x"]
    array([2., 4.])

``model`` is a model file (``FILE.py``, ``FILE.py:NAME``, ``FILE.keras``), a
SavedModel folder (``DIR``, ``DIR:SIGNATURE``; data in ``data=``) or the
model itself: a callable of tensors or a Keras model, with ``inputs`` (a dict of
arrays, or a callable taking a numpy Generator) as in a model file. Options are
keyword arguments named like the long options (``rtol``, ``rng_seed``,
``float64=False`` for ``--native-dtype``); a bad value raises
``gradcli.errors.UsageError`` naming the keyword, a model that cannot be loaded
or run ``gradcli.errors.ModelError`` (``check`` reports it as the model's error
row instead, as on the command line). pyproject.toml is not read: the call says
what it means. Importing this package does not import TensorFlow; each function
imports it when first called. A call leaves the caller's random streams as they
were (numpy's and ``random``'s global state, TensorFlow's global seed, Keras'
seed and session: ``gradcli.model.random_state``), and must be made eagerly:
inside a ``tf.function`` it raises ``UsageError``. ``gradcli.testing.assert_gradients_ok`` wraps
``check`` for test suites.
"""

from __future__ import annotations

import functools
import os
import sys
import types

__version__ = "0.1.0"

__all__ = ["check", "forward", "vjp", "jvp", "jacobian", "hessian", "logdet", "__version__"]


def _api(function):
    """Run an API function eagerly, with the caller's random streams saved and
    restored around it (``gradcli.model.random_state``)."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        _require_eager(function.__name__)
        from gradcli.model.random_state import callers_state

        with callers_state():
            return function(*args, **kwargs)

    return call


def _require_eager(function: str) -> None:
    """A model is run, differentiated and compared with numpy values: none of
    that can happen while a ``tf.function`` is being traced."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and not tf.executing_eagerly():
        from gradcli.errors import UsageError

        error = UsageError(
            f"gradcli.{function}() runs the model eagerly and cannot be called inside a "
            "tf.function or a graph: call it outside"
        )
        error.ag_pass_through = True  # autograph re-raises it as it is, not as a StagingError
        raise error


@_api
def check(model, *, inputs=None, wrt=None, fail_fast=False, jobs=1, progress=None, **options):
    """Compare analytic gradients with finite differences (``gradcli check``).

    ``model`` may also be a folder or a list of model files (a batch). ``options``
    are the fields of ``gradcli.options.CheckOptions`` (``mode``, ``rtol``, ``atol``,
    ``probes``, ``rng_seed``, ``overrides``, ``data``, ``float64``, ``jit_compile``, ``order``,
    ``allow_surrogate``, ``taylor``, ``fail_on``); they win over a model file's ``check`` dict.
    Returns a ``CheckResult``; a model that cannot be loaded or run is a
    ``ModelResult`` with ``error`` set.

        >>> gradcli.check(lambda x: tf.sin(x), inputs={"x": [0.5]}, mode="full").ok
        True
    """
    from gradcli.model.paths import expand_models
    from gradcli.options import CheckOptions

    _known(options, CheckOptions, "check", {"inputs", "wrt", "fail_fast", "jobs", "progress"})
    if wrt is not None:
        options["wrt"] = _names(wrt)
    checked = CheckOptions(**options)
    if isinstance(model, (list, tuple)):
        specs = [os.fsdecode(m) for m in model]
    else:
        specs = [_spec(model, inputs, "check")]
    if all(isinstance(spec, str) for spec in specs):
        specs = expand_models(specs)  # a file named twice is checked once
    else:
        specs = [s for spec in specs for s in (expand_models([spec]) if isinstance(spec, str) else [spec])]
    from gradcli.analyses.check import check_paths

    return check_paths(specs, checked, fixed=set(options), fail_fast=fail_fast, jobs=jobs, progress=progress)


@_api
def forward(model, *, inputs=None, **load):
    """Each output's shape, dtype and values at the model's point (``gradcli forward``).

    ``load`` are the fields of ``gradcli.options.LoadOptions`` (``wrt``,
    ``overrides``, ``rng_seed``, ``float64``, ``data``). Returns a ``ForwardResult``.
    """
    from gradcli.analyses import inspection

    return inspection.forward(_load(model, inputs, load, "forward"))


@_api
def vjp(model, cotangents=None, *, inputs=None, numeric=False, max_memory=None, **load):
    """J^T c for each differentiated input, summed over outputs (``gradcli vjp``).

    ``cotangents`` maps output names to seeds (``grad_ys``); outputs without one
    get zeros, and with none at all every output is seeded with ones. ``numeric``
    uses finite differences only (models TensorFlow cannot differentiate);
    ``max_memory`` (bytes) bounds its Jacobian (``gradcli.memory``).
    Returns a ``VjpResult``; ``.arrays()`` maps input names to gradients.

        >>> gradcli.vjp(lambda x: x * x, {"output": [2.0, 3.0]}, inputs={"x": [1.0, 2.0]}).arrays()["x"]
        array([ 4., 12.])
    """
    from gradcli.analyses import inspection

    return inspection.vjp(
        _load(model, inputs, load, "vjp"), _arrays(cotangents), numeric=numeric, max_memory=max_memory
    )


@_api
def jvp(model, tangents, *, inputs=None, numeric=False, **load):
    """J t for every output, forward mode (``gradcli jvp``).

    ``tangents`` maps input names to directions; inputs without one get zeros.
    Returns a ``JvpResult``; ``.arrays()`` maps output names to J t.

        >>> gradcli.jvp(lambda x: x * x, {"x": [1.0, 0.0]}, inputs={"x": [1.0, 2.0]}).arrays()["output"]
        array([2., 0.])
    """
    from gradcli.analyses import inspection

    return inspection.jvp(_load(model, inputs, load, "jvp"), _arrays(tangents), numeric=numeric)


@_api
def jacobian(model, of=None, *, inputs=None, numeric=False, mode="auto", max_memory=None, **load):
    """The full Jacobian of each output (``of``: names, default every floating
    output) with respect to each differentiated input (``gradcli jacobian``).
    ``mode`` is ``auto``, ``reverse`` or ``forward``; ``max_memory`` (bytes,
    default half the available memory) bounds the blocks (``gradcli.memory``).
    Returns a ``JacobianResult``;
    ``.arrays()`` is keyed ``OUTPUT/INPUT``.

        >>> gradcli.jacobian(lambda x: x * x, inputs={"x": [1.0, 2.0]}).arrays()["output/x"]
        array([[2., 0.],
               [0., 4.]])
    """
    from gradcli.analyses import inspection

    model = _load(model, inputs, load, "jacobian")
    return inspection.jacobian(model, _names(of), numeric=numeric, mode=mode, max_memory=max_memory)


@_api
def hessian(model, *, inputs=None, **options):
    """Hessian of the model's scalar output: eigenvalues, definiteness, convexity
    (``gradcli hessian``). ``options`` are the fields of ``gradcli.options.HessianOptions``
    (``expect``, ``method``, ``samples``, ``radius``, ``cotangents``...). Returns a
    ``HessianResult``; ``.ok`` is False when ``expect`` fails or the Hessian
    disagrees with finite differences.

        >>> gradcli.hessian(lambda x: tf.reduce_sum(x ** 2), inputs={"x": [1.0, 2.0]},
        ...                 expect="convex").spectrum.eigenvalues
        array([2., 2.])
    """
    from gradcli.options import HessianOptions

    _known(options, HessianOptions, "hessian", {"inputs"})
    if "wrt" in options:
        options["wrt"] = _names(options["wrt"])
    for key in ("overrides", "cotangents"):
        if key in options:
            options[key] = _arrays(options[key])
    checked = HessianOptions(**options)
    from gradcli.analyses.hessian import analyse_path

    return analyse_path(_spec(model, inputs, "hessian"), checked)


@_api
def logdet(model, *, inputs=None, **options):
    """A flow's declared ``log_det_jacobian`` against slogdet of its autodiff
    Jacobian (``gradcli logdet``). ``options`` are the fields of
    ``gradcli.options.LogdetOptions`` (``wrt``, ``output``, ``rtol``, ``atol``,
    ``overrides``, ``rng_seed``, ``max_memory``). Returns a ``LogdetResult``.
    """
    from gradcli.options import LogdetOptions

    _known(options, LogdetOptions, "logdet", {"inputs"})
    if "overrides" in options:
        options["overrides"] = _arrays(options["overrides"])
    checked = LogdetOptions(**options)
    from gradcli.analyses.logdet import check_logdet_path

    return check_logdet_path(_spec(model, inputs, "logdet"), checked)


# --- helpers ------------------------------------------------------------------


def _spec(model, inputs, function: str):
    """A model file path as a string, or a model object as a module holding
    ``model`` and ``inputs``: the shape a model file has."""
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        if inputs is not None:
            raise TypeError(f"gradcli.{function}(): inputs= is for a model object; a model file defines its own")
        return os.fsdecode(model)
    module = types.ModuleType(getattr(model, "__name__", None) or type(model).__name__)
    module.model = model
    if inputs is not None:
        module.inputs = inputs
    return module


def _load(model, inputs, load: dict, function: str):
    from gradcli.options import LoadOptions

    _known(load, LoadOptions, function, {"inputs"})
    if "wrt" in load:
        load["wrt"] = _names(load["wrt"])
    for key in ("overrides", "data"):
        if key in load:
            load[key] = _arrays(load[key])
    LoadOptions(**load)  # validates before TensorFlow is imported
    from gradcli.model.loading import load_model

    return load_model(_spec(model, inputs, function), **load)


def _known(given: dict, options_class, function: str, extra: set) -> None:
    known = set(options_class.__dataclass_fields__)
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(
            f"gradcli.{function}() got unknown options {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known | extra))})"
        )


def _names(names):
    if names is None:
        return None
    return [names] if isinstance(names, str) else list(names)


def _arrays(values):
    """Seeds and overrides given as lists or scalars become float arrays, as
    a VALUE on the command line does; arrays keep their dtype."""
    if values is None:
        return None
    import numpy as np

    return {name: np.asarray(value) for name, value in values.items()}
