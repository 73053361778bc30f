"""gradcli: check and inspect gradients of TensorFlow models.

Importing this package does not import TensorFlow; the API functions below
import it when first called.

    >>> import gradcli
    >>> result = gradcli.check("sample_models/square.py", rtol=1e-8)
    >>> result.ok, result.exit_code
    (True, 0)

``gradcli.testing.assert_gradients_ok`` wraps ``check`` for test suites.
"""

from __future__ import annotations

import os
import types

__version__ = "0.1.0"

__all__ = ["check", "__version__"]


def check(model, *, inputs=None, wrt=None, fail_fast=False, jobs=1, progress=None, **options):
    """Check models as ``gradcli check`` does; returns the ``CheckResult`` the CLI renders.

    ``model`` is a model file path (``FILE.py`` or ``FILE.py:NAME``), a folder,
    a list of those, or the model itself: a callable of tensors or a Keras
    model, with ``inputs`` (a dict, or a callable taking a numpy Generator) as
    in a model file. ``options`` are the fields of ``gradcli.analyses.check.CheckOptions``
    (``mode``, ``rtol``, ``atol``, ``probes``, ``rng_seed``, ``overrides``,
    ``float64``, ``jit_compile``). Options given here win over a model file's
    ``check`` dict; pyproject.toml is not read (the call says what it means).
    A model that cannot be loaded or run is a ``ModelResult`` with ``error``
    set, as on the command line; bad options raise ``gradcli.errors.UsageError``.
    """
    from gradcli.analyses.check import CheckOptions, check_paths

    known = {f for f in CheckOptions.__dataclass_fields__}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"gradcli.check() got unknown options {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known | {'inputs', 'wrt', 'fail_fast', 'jobs', 'progress'}))})"
        )
    if wrt is not None:
        options["wrt"] = [wrt] if isinstance(wrt, str) else list(wrt)
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        specs = [os.fsdecode(model)]
    elif isinstance(model, (list, tuple)):
        specs = [os.fsdecode(m) for m in model]
    else:
        specs = [_as_module(model, inputs)]
    if inputs is not None and not isinstance(specs[0], types.ModuleType):
        raise TypeError("gradcli.check(): inputs= is for a model object; a model file defines its own")
    from gradcli.model.paths import expand_models

    specs = [s for spec in specs for s in (expand_models([spec]) if isinstance(spec, str) else [spec])]
    return check_paths(
        specs, CheckOptions(**options), fixed=set(options),
        fail_fast=fail_fast, jobs=jobs, progress=progress,
    )


def _as_module(model, inputs) -> types.ModuleType:
    """A model object and its inputs as a module, the shape a model file has."""
    name = getattr(model, "__name__", None) or type(model).__name__
    module = types.ModuleType(name)
    module.model = model
    if inputs is not None:
        module.inputs = inputs
    return module


# Inspecting derivatives: each takes a model spec (FILE.py, FILE.py:NAME, FILE.keras)
# or a loaded gradcli.model.loading.Model, plus load options (wrt, overrides, rng_seed,
# data), and returns the result object that `gradcli forward/vjp/jvp/jacobian` renders.
__all__ += ["forward", "vjp", "jvp", "jacobian"]


def _model(model, load_options):
    from gradcli.model.loading import Model, load_model

    return model if isinstance(model, Model) else load_model(str(model), **load_options)


def forward(model, **load_options):
    from gradcli.analyses import inspection as inspect

    return inspect.forward(_model(model, load_options))


def vjp(model, cotangents=None, *, numeric=False, **load_options):
    from gradcli.analyses import inspection as inspect

    return inspect.vjp(_model(model, load_options), cotangents, numeric=numeric)


def jvp(model, tangents, *, numeric=False, **load_options):
    from gradcli.analyses import inspection as inspect

    return inspect.jvp(_model(model, load_options), tangents, numeric=numeric)


def jacobian(model, of=None, *, numeric=False, mode="auto", **load_options):
    from gradcli.analyses import inspection as inspect

    return inspect.jacobian(_model(model, load_options), of, numeric=numeric, mode=mode)
