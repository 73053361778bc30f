"""Whose exception it is: a check that raises reports a bug of gradcli's as an
internal error and anything the model (or TensorFlow running it) raised as the
model's (``diagnose.raised``), naming whether a derivative was being taken.
"""

from __future__ import annotations

import os

#: gradcli's own package folder: a traceback whose deepest frame is under it
#: (and that TensorFlow did not raise) is gradcli's bug.
PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def raised_in_gradcli(exc: BaseException) -> bool:
    """The deepest frame is gradcli's own code and TensorFlow did not raise it
    (an op error is the model's, wherever TensorFlow surfaced it; so is what
    TensorFlow's JVP dispatch raised through gradcli's front to it,
    ``numerics.jvp_functions``, whose frame TensorFlow leaves the deepest)."""
    import traceback

    from gradcli.numerics.jvp_functions import raised_through_front
    from gradcli.tf_import import import_tensorflow

    if isinstance(exc, import_tensorflow().errors.OpError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    return (bool(frames) and os.path.abspath(frames[-1].filename).startswith(PACKAGE)
            and not raised_through_front(frames[-1]))


def in_autodiff(exc: BaseException) -> bool:
    """Raised while TensorFlow computed a derivative (a tape, an accumulator)."""
    import traceback

    return any(
        os.path.basename(f.filename) in ("autodiff.py", "backprop.py", "forwardprop.py")
        for f in traceback.extract_tb(exc.__traceback__)
    )
