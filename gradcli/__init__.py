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
