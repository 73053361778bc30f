"""gradcli: check and inspect gradients of TensorFlow models.

Importing this package does not import TensorFlow; the API functions below
import it when first called.
"""

__version__ = "0.1.0"

__all__ = ["check", "__version__"]


def check(model, **options):
    """Check one model file (or a list of them); returns a ``CheckResult``.

    Options are those of ``gradcli check`` (``mode``, ``rtol``, ``atol``,
    ``probes``, ``rng_seed``, ``wrt``, ``overrides``...).
    """
    from gradcli.check import CheckOptions, check_paths

    specs = [model] if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__") else list(model)
    return check_paths([str(s) for s in specs], CheckOptions(**options))


# Inspecting derivatives: each takes a model spec (FILE.py, FILE.py:NAME, FILE.keras)
# or a loaded gradcli.modelfile.Model, plus load options (wrt, overrides, rng_seed,
# data), and returns the result object that `gradcli forward/vjp/jvp/jacobian` renders.
__all__ += ["forward", "vjp", "jvp", "jacobian"]


def _model(model, load_options):
    from gradcli.modelfile import Model, load_model

    return model if isinstance(model, Model) else load_model(str(model), **load_options)


def forward(model, **load_options):
    from gradcli import inspect

    return inspect.forward(_model(model, load_options))


def vjp(model, cotangents=None, *, numeric=False, **load_options):
    from gradcli import inspect

    return inspect.vjp(_model(model, load_options), cotangents, numeric=numeric)


def jvp(model, tangents, *, numeric=False, **load_options):
    from gradcli import inspect

    return inspect.jvp(_model(model, load_options), tangents, numeric=numeric)


def jacobian(model, of=None, *, numeric=False, mode="auto", **load_options):
    from gradcli import inspect

    return inspect.jacobian(_model(model, load_options), of, numeric=numeric, mode=mode)
