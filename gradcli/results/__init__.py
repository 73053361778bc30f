"""Result objects: plain data that the analyses return and the renderers read.

One module per analysis; no TensorFlow, no printing. ``gradcli.results.check``
holds the verdict words shared by every comparison.
"""

from gradcli.results.check import *  # noqa: F401,F403
from gradcli.results.check import __all__ as _check_all
from gradcli.results.hessian import (  # noqa: F401
    FDCheck, HessianResult, Sampling, SamplePoint, Slice, Spectrum, Trace,
)
from gradcli.results.inspection import (  # noqa: F401
    ForwardResult, JacobianBlock, JacobianEntry, JacobianResult, JvpResult, NamedArray,
    Summary, VjpResult, WeightNorm,
)
from gradcli.results.logdet import LogdetExample, LogdetResult  # noqa: F401

__all__ = [
    *_check_all,
    "FDCheck", "HessianResult", "Sampling", "SamplePoint", "Slice", "Spectrum", "Trace",
    "ForwardResult", "JacobianBlock", "JacobianEntry", "JacobianResult", "JvpResult",
    "NamedArray", "Summary", "VjpResult", "WeightNorm", "LogdetExample", "LogdetResult",
]
